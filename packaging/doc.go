// Package packaging holds no code: it is the home of what ships nodedns (the systemd unit, nfpm's
// scripts and files, the default config, the Ansible role, the node-problem-detector config) and of
// the tests that check every shipped file and install the packages for real.
package packaging
