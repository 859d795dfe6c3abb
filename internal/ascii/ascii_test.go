package ascii

import (
	"strconv"
	"testing"
)

func TestHex(t *testing.T) {
	for i := 0; i < 256; i++ {
		c := byte(i)
		v, err := strconv.ParseUint(string(rune(i)), 16, 8)
		want := err == nil && i < 128
		if got := IsHex(c); got != want {
			t.Errorf("IsHex(%q) = %v, want %v", c, got, want)
		}
		if want && HexVal(c) != int(v) {
			t.Errorf("HexVal(%q) = %d, want %d", c, HexVal(c), v)
		}
	}
}

func TestIsUUID(t *testing.T) {
	for s, want := range map[string]bool{
		"5b4c9a46-6b8e-4f0c-9a55-1a2b3c4d5e6f":   true,
		"5B4C9A46-6B8E-4F0C-9A55-1A2B3C4D5E6F":   true,
		"5b4c9a46-6b8e-4f0c-9a55-1a2b3c4d5e6":    false, // short
		"5b4c9a46-6b8e-4f0c-9a55-1a2b3c4d5e6f0":  false, // long
		"5b4c9a46x6b8e-4f0c-9a55-1a2b3c4d5e6f":   false, // no dash
		"5b4c9a46-6b8e-4f0c-9a55-1a2b3c4d5e6g":   false, // not hex
		"{5b4c9a46-6b8e-4f0c-9a55-1a2b3c4d5e6f}": false,
		"":                                       false,
	} {
		if got := IsUUID(s); got != want {
			t.Errorf("IsUUID(%q) = %v, want %v", s, got, want)
		}
	}
}
