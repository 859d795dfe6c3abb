package resolvconf

import "strings"

// KubeletView is a resolv.conf as kubelet reads it for pods
// (parseResolvConf in pkg/kubelet/network/dns/dns.go, Kubernetes 1.28+). It
// differs from glibc's reading: kubelet trims each line first (so an
// indented line counts), knows '#' comments only, ignores domain lines, lets
// an empty search line clear the list, and strips one trailing dot from each
// search domain. Pods with dnsPolicy Default, node-cache among them, get
// these values, so a loop address that glibc would skip can still reach
// node-cache's forward . /etc/resolv.conf.
type KubeletView struct {
	// Nameservers are the second word of every nameserver line, unparsed:
	// kubelet copies the text and validates it later.
	Nameservers []string
	// Search is the last search line's domains, trailing dot stripped and
	// "." dropped.
	Search []string
	// Options are the option words of all options lines; a later word
	// replaces an earlier one with the same name (the part before ':'),
	// kept at the place where the name first appeared. kubelet itself
	// returns them in map order.
	Options []string
}

// Kubelet returns the file as kubelet reads it.
func (f *File) Kubelet() KubeletView {
	var v KubeletView
	optIndex := map[string]int{}
	for _, l := range f.Lines {
		line := strings.TrimSpace(l.Raw)
		if strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		switch fields[0] {
		case "nameserver":
			if len(fields) >= 2 {
				v.Nameservers = append(v.Nameservers, fields[1])
			}
		case "search":
			v.Search = nil
			for _, d := range fields[1:] {
				if d != "." {
					v.Search = append(v.Search, strings.TrimSuffix(d, "."))
				}
			}
		case "options":
			for _, o := range fields[1:] {
				name, _, _ := strings.Cut(o, ":")
				if i, ok := optIndex[name]; ok {
					v.Options[i] = o
					continue
				}
				optIndex[name] = len(v.Options)
				v.Options = append(v.Options, o)
			}
		}
	}
	return v
}
