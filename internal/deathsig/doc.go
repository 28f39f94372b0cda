// Package deathsig starts a child process so that it dies with its
// parent: on Linux the kernel sends it SIGKILL when the parent dies, even
// without a cleanup of the parent's (a panic, SIGKILL, a test timeout).
// Elsewhere the parent's own cleanup is all there is.
//
// The connector's keepers, the test helpers' processes (redis-server,
// Jaeger) and the benchmark's children all start this way.
//
// # Files
//
//	doc.go                this overview
//	deathsig_linux.go     Attr: Pdeathsig set to SIGKILL
//	deathsig_other.go     Attr: nil, elsewhere
package deathsig
