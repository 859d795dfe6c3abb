package statefile

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nodedns/nodedns/internal/nodefs"
)

type record struct {
	Name  string            `json:"name"`
	Count int               `json:"count"`
	Tags  map[string]string `json:"tags,omitempty"`
}

func TestDecode(t *testing.T) {
	tests := []struct {
		name, data string
		want       record
		err        string // a part of the error; "" for none
	}{
		{name: "one value", data: `{"name":"a","count":2}`, want: record{Name: "a", Count: 2}},
		{name: "white space around it", data: " \n{\"name\":\"a\"}\n\n\t", want: record{Name: "a"}},
		{name: "unknown field", data: `{"name":"a","extra":1}`, err: `unknown field "extra"`},
		{name: "trailing garbage", data: `{"name":"a"}x`, err: "data after the JSON value, at offset 12"},
		{name: "second value", data: `{"name":"a"} {"name":"b"}`, err: "data after the JSON value, at offset 13: a state file holds one value"},
		{name: "a second closing brace", data: `{"name":"a"}}`, err: "data after the JSON value, at offset 12"},
		{name: "cut short", data: `{"name":"a"`, err: "unexpected EOF"},
		{name: "empty", data: ``, err: "EOF"},
		{name: "wrong type", data: `{"count":"2"}`, err: "cannot unmarshal string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got record
			err := Decode([]byte(tt.data), &got)
			if tt.err == "" {
				if err != nil {
					t.Fatalf("Decode: %v", err)
				}
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("(-want +got):\n%s", diff)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("Decode(%q) = %v, want an error with %q", tt.data, err, tt.err)
			}
		})
	}
}

// TestDecodeBound: a state file over the state kind's limit is refused before it is decoded, with
// the error ReadFile gives for one.
func TestDecodeBound(t *testing.T) {
	big := `{"name":"` + strings.Repeat("a", int(Kind.Max)) + `"}`
	var r record
	err := Decode([]byte(big), &r)
	if !errors.Is(err, nodefs.ErrTooLarge) || !strings.Contains(err.Error(), "state file") {
		t.Fatalf("Decode of %d bytes = %v, want ErrTooLarge naming the state file kind", len(big), err)
	}
	if r.Name != "" {
		t.Error("the value was decoded anyway")
	}
	fits := `{"name":"` + strings.Repeat("a", int(Kind.Max)-len(`{"name":""}`)) + `"}`
	if err := Decode([]byte(fits), &r); err != nil {
		t.Fatalf("Decode of exactly %d bytes: %v", len(fits), err)
	}
}

func TestEncode(t *testing.T) {
	got, err := Encode(record{Name: "a", Count: 1, Tags: map[string]string{"z": "1", "b": "2"}})
	if err != nil {
		t.Fatal(err)
	}
	want := "{\n  \"name\": \"a\",\n  \"count\": 1,\n  \"tags\": {\n    \"b\": \"2\",\n    \"z\": \"1\"\n  }\n}\n"
	if string(got) != want {
		t.Errorf("Encode:\n%s\nwant:\n%s", got, want)
	}
	if _, err := Encode(func() {}); err == nil {
		t.Error("a function encoded")
	}
}

// FuzzDecode: whatever Decode accepts is one value of the record: it renders and decodes back to
// the same record, and the same bytes with anything but white space after them are refused.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"name":"a","count":2,"tags":{"x":"y"}}`))
	f.Add([]byte(`{"name":"a"} {}`))
	f.Add([]byte(`{"extra":1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var r record
		if err := Decode(data, &r); err != nil {
			return
		}
		out, err := Encode(r)
		if err != nil {
			t.Fatalf("Encode of what decoded: %v", err)
		}
		var again record
		if err := Decode(out, &again); err != nil {
			t.Fatalf("Decode of %q: %v", out, err)
		}
		if diff := cmp.Diff(r, again); diff != "" {
			t.Fatalf("round trip (-first +again):\n%s", diff)
		}
		var twice record
		if err := Decode(append(append([]byte(nil), data...), "{}"...), &twice); err == nil {
			t.Fatalf("%q with a second value decoded", data)
		}
	})
}
