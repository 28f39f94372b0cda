// Package benchlab is the laboratory of a benchmark that runs a product
// through its own entry points, as separate processes on one machine, and
// states each figure against a floor measured in the same run.
// cmd/hubbench holds the scenarios and the report; this package holds
// what any such benchmark needs, and knows nothing of MCP or the hub.
//
//   - procs.go: a Supervisor that starts child processes (and
//     redis-server, through internal/redistest), waits for them to be
//     ready by polling with a deadline (Poll, WaitHTTP), never by sleeping,
//     counts their CPU time and stops them all, even when the supervisor
//     crashes (Pdeathsig on Linux, through internal/deathsig);
//   - procfs.go: CPU time, machine busy time and RSS from /proc, and the
//     limit of open files;
//   - cpusplit.go: a CPUSplit of measured windows: how busy the machine
//     was, and which process did the work;
//   - machine.go: a description of the machine and the commit measured;
//   - stats.go: nearest-rank percentiles and medians over rounds;
//   - format.go and table.go: figures as text, and a Table rendered for a
//     terminal and as Markdown.
//
// The figures come from Linux's /proc; on other systems those readings
// fail, and CPU and memory figures read zero.
package benchlab
