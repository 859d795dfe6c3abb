package networkmanager

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseKeyFile(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []*Group
		wantErr *ParseError
	}{
		{name: "kubespray dns.conf", in: "[global-dns-domain-*]\nservers = 169.254.25.10,10.66.0.53\n\n[global-dns]\nsearches = default.svc.cluster.local,svc.cluster.local\noptions = ndots:2,timeout:2,attempts:2\n",
			want: []*Group{
				{Name: "global-dns-domain-*", Line: 1, Entries: []Entry{{"servers", "169.254.25.10,10.66.0.53", 2}}},
				{Name: "global-dns", Line: 4, Entries: []Entry{{"searches", "default.svc.cluster.local,svc.cluster.local", 5}, {"options", "ndots:2,timeout:2,attempts:2", 6}}},
			}},
		{name: "comments, blanks, CRLF, indentation, trailing spaces kept in values", in: "# c\r\n  [main]  \r\n\tdns = none  \r\n   \n#x=y\n",
			want: []*Group{{Name: "main", Line: 2, Entries: []Entry{{"dns", "none  ", 3}}}}},
		{name: "a group twice is one group; a key twice keeps its place and the last value", in: "[a]\nk=1\nj=2\n[b]\nx=1\n[a]\nk=3\n",
			want: []*Group{{Name: "a", Line: 1, Entries: []Entry{{"k", "3", 7}, {"j", "2", 3}}}, {Name: "b", Line: 4, Entries: []Entry{{"x", "1", 5}}}}},
		{name: "an empty value and an = in the value", in: "[g]\nk=\nu=a=b\n",
			want: []*Group{{Name: "g", Line: 1, Entries: []Entry{{"k", "", 2}, {"u", "a=b", 3}}}}},
		{name: "a locale key", in: "[g]\nname[de_DE.UTF-8@euro]=x\nname[]=y\n",
			want: []*Group{{Name: "g", Line: 1, Entries: []Entry{{"name[de_DE.UTF-8@euro]", "x", 2}, {"name[]", "y", 3}}}}},
		{name: "last line without newline keeps its CR", in: "[g]\nk=v\r",
			want: []*Group{{Name: "g", Line: 1, Entries: []Entry{{"k", "v\r", 2}}}}},
		{name: "nothing after a NUL counts", in: "[g]\nk=v\x00junk\n\x00[[[\n",
			want: []*Group{{Name: "g", Line: 1, Entries: []Entry{{"k", "v", 2}}}}},
		{name: "empty file", in: "", want: nil},
		// The reasons are GLib's, as NM 1.42.4 prints them after the file name (measured with
		// NetworkManager --print-config, exit 7).
		{name: "not a key", in: "[global-dns-domain-*]\nservers=10.66.0.53\nthis is not a key\n",
			wantErr: &ParseError{Path: "f", Line: 3, Reason: "Key file contains line “this is not a key” which is not a key-value pair, group, or comment"}},
		{name: "semicolon comment", in: "; a semicolon comment\n[main]\n",
			wantErr: &ParseError{Path: "f", Line: 1, Reason: "Key file contains line “; a semicolon comment” which is not a key-value pair, group, or comment"}},
		{name: "key before any group", in: "dns=default\n[main]\n",
			wantErr: &ParseError{Path: "f", Line: 1, Reason: "Key file does not start with a group"}},
		{name: "unclosed group", in: "[global-dns-domain-*]\nservers=169.254.25.10\n[bad\n",
			wantErr: &ParseError{Path: "f", Line: 3, Reason: "Key file contains line “[bad” which is not a key-value pair, group, or comment"}},
		{name: "text after a group", in: "[main] x\n", wantErr: &ParseError{Path: "f", Line: 1, Reason: "Key file contains line “[main] x” which is not a key-value pair, group, or comment"}},
		{name: "empty group name", in: "[]\n", wantErr: &ParseError{Path: "f", Line: 1, Reason: "Invalid group name: "}},
		{name: "control character in a group name", in: "[a\tb]\n", wantErr: &ParseError{Path: "f", Line: 1, Reason: "Invalid group name: a\tb"}},
		{name: "line starting with =", in: "[g]\n=v\n", wantErr: &ParseError{Path: "f", Line: 2, Reason: "Key file contains line “=v” which is not a key-value pair, group, or comment"}},
		{name: "bracket in a key", in: "[g]\na]b=v\n", wantErr: &ParseError{Path: "f", Line: 2, Reason: "Invalid key name: a]b"}},
		{name: "space before a locale", in: "[g]\nk [de]=v\n", wantErr: &ParseError{Path: "f", Line: 2, Reason: "Invalid key name: k [de]"}},
		{name: "key that is a group opener", in: "[g]\n[bad=x\n", wantErr: &ParseError{Path: "f", Line: 2, Reason: "Invalid key name: [bad"}},
		{name: "bad encoding", in: "[g]\nEncoding=latin1\n", wantErr: &ParseError{Path: "f", Line: 2, Reason: "Key file contains unsupported encoding “latin1”"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kf, err := ParseKeyFile("f", []byte(tt.in))
			if tt.wantErr != nil {
				var pe *ParseError
				if !errors.As(err, &pe) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				if diff := cmp.Diff(tt.wantErr, pe, cmp.AllowUnexported(ParseError{})); diff != "" {
					t.Errorf("error (-want +got):\n%s", diff)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, kf.Groups); diff != "" {
				t.Errorf("groups (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSplitList(t *testing.T) {
	tests := []struct {
		raw     string
		sep     byte
		want    []string
		wantErr bool
	}{
		{"a,b", ',', []string{"a", "b"}, false},
		{"a,b,", ',', []string{"a", "b"}, false},
		{"a,,b", ',', []string{"a", "", "b"}, false},
		{",a", ',', []string{"", "a"}, false},
		{"", ',', nil, false},
		{`a\,b,c`, ',', []string{"a,b", "c"}, false},
		{`\sa,b\tc,\\`, ',', []string{" a", "b\tc", `\`}, false},
		{`a\x`, ',', nil, true},
		{`a\`, ',', nil, true},
		{"10.0.0.1;10.0.0.2;", ';', []string{"10.0.0.1", "10.0.0.2"}, false},
		{"\xff", ',', nil, true},
	}
	for _, tt := range tests {
		got, err := SplitList(tt.raw, tt.sep)
		if (err != nil) != tt.wantErr {
			t.Errorf("SplitList(%q) err = %v, want error %v", tt.raw, err, tt.wantErr)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("SplitList(%q) (-want +got):\n%s", tt.raw, diff)
		}
	}
	if _, err := UnescapeValue(`a\,b`); err == nil {
		t.Error(`UnescapeValue("a\,b") accepted an escaped separator outside a list`)
	}
	if got, err := UnescapeValue(`\sx\n`); err != nil || got != " x\n" {
		t.Errorf("UnescapeValue = %q, %v", got, err)
	}
}

func TestEscapeValueRoundTrip(t *testing.T) {
	for _, s := range []string{"plain", " lead", "a,b", "tab\there", `back\slash`, "nl\nx", ""} {
		got, err := SplitList(escapeValue(s, ','), ',')
		want := []string{s}
		if s == "" {
			want = nil
		}
		if err != nil || !cmp.Equal(got, want) {
			t.Errorf("escape %q -> %q -> %q, %v", s, escapeValue(s, ','), got, err)
		}
	}
}

func TestParseBool(t *testing.T) {
	for in, want := range map[string]bool{"true": true, " YES ": true, "on": true, "1": true, "false": false, "No": false, "off": false, "0": false} {
		if got, ok := ParseBool(in); !ok || got != want {
			t.Errorf("ParseBool(%q) = %v, %v", in, got, ok)
		}
	}
	for _, in := range []string{"", "2", "truee", "y"} {
		if _, ok := ParseBool(in); ok {
			t.Errorf("ParseBool(%q) accepted", in)
		}
	}
}

func FuzzParseKeyFile(f *testing.F) {
	for _, s := range []string{"[g]\nk=v\n", "[global-dns-domain-*]\nservers = 1.2.3.4,::1\n", "#c\n[a]\n[b]\nx=\\s\\,y\n", "k=v", "[a\n", "\x00[a]\r\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		kf, err := ParseKeyFile("f", data)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) || pe.Line < 1 || pe.Reason == "" {
				t.Fatalf("error %v is not a *ParseError with a line", err)
			}
			return
		}
		for _, g := range kf.Groups {
			if !isGroupName(g.Name) {
				t.Fatalf("accepted group name %q", g.Name)
			}
			for _, e := range g.Entries {
				if !isKeyName(e.Key) || e.Line < g.Line {
					t.Fatalf("bad entry %+v in group %q", e, g.Name)
				}
				if items, err := SplitList(e.Value, ','); err == nil {
					for _, it := range items {
						if back, err := SplitList(escapeValue(it, ','), ','); err != nil || (it != "" && (len(back) != 1 || back[0] != it)) {
							t.Fatalf("item %q does not survive escaping: %q %v", it, back, err)
						}
					}
				}
			}
		}
	})
}
