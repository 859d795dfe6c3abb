package resolvconf

import (
	"errors"
	"fmt"
	"strings"
)

// Validate reports the entries of s that Render would leave out or change:
// an invalid address or one whose zone has blanks, a search domain or option
// that is empty or contains blanks or a NUL, and a header line with a line
// break or NUL.
func (s Spec) Validate() error {
	var errs []error
	for i, h := range s.Header {
		if strings.ContainsAny(h, "\n\r\x00") {
			errs = append(errs, fmt.Errorf("header line %d: contains a line break or NUL", i+1))
		}
	}
	for i, a := range s.Nameservers {
		if !nameserverOK(a) {
			errs = append(errs, fmt.Errorf("nameserver %d: %q cannot be written as a nameserver line", i+1, a.String()))
		}
	}
	for i, d := range s.Search {
		if !wordOK(d) {
			errs = append(errs, fmt.Errorf("search domain %d: %q is empty or contains blanks or a NUL", i+1, clip(d)))
		}
	}
	for i, o := range s.Options {
		if !wordOK(o) {
			errs = append(errs, fmt.Errorf("option %d: %q is empty or contains blanks or a NUL", i+1, clip(o)))
		}
	}
	return errors.Join(errs...)
}
