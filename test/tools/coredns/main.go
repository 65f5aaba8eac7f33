// Command coredns is CoreDNS with only the plugins the real node's Corefile
// (hack/controlplane/realnode/Corefile) names. CoreDNS's own main links every plugin, and its
// cloud, tracing and storage plugins were most of its build's CPU; none of them runs here. A
// plugin added to the Corefile must be added here too: CoreDNS refuses to start on a directive
// it does not link ("Unknown directive"), and `coredns -plugins` lists the linked ones.
package main

import (
	"github.com/coredns/coredns/coremain"
	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/ready"
)

func main() {
	coremain.Run()
}
