// Package engine runs nettrace's one-way pipeline: sources (the live ring
// buffer through Capture, recordings through Replay) -> correlation into
// flows -> explanation -> sinks (text or JSON on stdout, a recording, the
// flight recorder). watch, record and replay assemble it; the command line
// keeps flags, the terminal and the wiring of probes and watchers.
package engine
