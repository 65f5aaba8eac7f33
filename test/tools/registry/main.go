// Command registry serves an OCI registry for the local cluster's real node
// (hack/controlplane/realnode-up.sh starts it): the node's containerd pulls docker.io images
// through it, so that a manifest whose pods say imagePullPolicy: Always runs, as written, with
// images built on this machine (nothing can be pulled from outside). Blobs are kept on disk
// under -dir, manifests in memory: realnode-images.sh --push pushes them again after a start.
package main

import (
	"flag"
	"io"
	"log"
	"net"
	"net/http"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:5115", "address to listen on (loopback: the node's containerd is the only client)")
	dir := flag.String("dir", "", "directory for blobs (required)")
	flag.Parse()
	if *dir == "" {
		log.Fatal("-dir is required")
	}
	l, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("serving on %s, blobs in %s", l.Addr(), *dir)
	srv := &http.Server{
		ReadHeaderTimeout: 10 * time.Second,
		Handler: registry.New(
			registry.WithBlobHandler(registry.NewDiskBlobHandler(*dir)),
			registry.Logger(log.New(io.Discard, "", 0)), // one line per request is noise in the node's logs
		),
	}
	log.Fatal(srv.Serve(l))
}
