// Package ascii holds the byte classes the parsers of outside input share (systemd's unit files,
// dhclient's lease files, the runtimes' network namespace names): hex digits and textual UUIDs,
// written once.
package ascii

// IsHex reports whether c is a hex digit, either case.
func IsHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// HexVal is the value of the hex digit c; c must be one (IsHex).
func HexVal(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	default:
		return int(c-'A') + 10
	}
}

// UUIDLen is the length of a textual UUID.
const UUIDLen = 36

// IsUUID reports whether s is a textual UUID: 8-4-4-4-12 hex digits, either case.
func IsUUID(s string) bool {
	if len(s) != UUIDLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch i {
		case 8, 13, 18, 23:
			if s[i] != '-' {
				return false
			}
		default:
			if !IsHex(s[i]) {
				return false
			}
		}
	}
	return true
}
