module github.com/troupe-dev/troupe/test/tools/registry

go 1.26.0

require github.com/google/go-containerregistry v0.22.1
