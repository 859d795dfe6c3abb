// Package networkmanager reads what NetworkManager is configured with and what it was handed by
// DHCP, from FILES only (no D-Bus, no exec; networkmanager/bus is the D-Bus client), and renders the
// drop-in nodedns uses to fix NetworkManager at the source: /etc/NetworkManager/conf.d/zz-nodedns.conf.
//
// Every rule follows NetworkManager 1.42.4 (Debian 12's build, the version RHEL 9.2-9.4 ships as
// 1.42.x) and GLib 2.74's GKeyFile; rules checked against the real daemon in a sandbox say
// "measured". What NM 1.42 does with a global DNS configuration, DHCP renewals, reloads, restarts
// and bad files is written down in FACTS.md beside this file, each fact with the test that proves
// it (privileged_test.go).
//
//   - Load: everything below as one node has it (the three views of the configuration: all files,
//     without zz-nodedns.conf, without /run; profiles; devices with their interface names), each
//     file NM would refuse a nodefs.Problem naming it; Watches declares what it reads.
//   - LoadConfig: NetworkManager.conf, the three conf.d directories in NM's order with NM's
//     name shadowing, and NetworkManager-intern.conf, merged key by key with the file:line of each
//     effective key; GlobalDNS, DNSMode, RCManager as typed views; a file NM refuses is a
//     *ParseError with NM's own reason.
//   - LoadConnections / ParseConnection: keyfile profiles (id, uuid, interface-name, ipv4/ipv6
//     method, dns, dns-search, ignore-auto-dns).
//   - LoadDeviceStates / ParseDeviceState: /run/NetworkManager/devices/IFINDEX with the DHCP
//     options; DHCP4DNS / DHCP6DNS read servers and search domains from NM's option names (the
//     same as over D-Bus). (The internal client's lease files hold only the address: nothing
//     nodedns needs.)
//   - ResolvConfByNM: does NetworkManager write /etc/resolv.conf.
//   - RenderOverride / ParseOverride / CheckOverride: zz-nodedns.conf, and whether NM would use it.
package networkmanager
