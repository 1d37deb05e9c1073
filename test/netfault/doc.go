// Package netfault injects controllable network faults into real TCP
// traffic on loopback, and runs the fencepost binary as child processes
// that tests can stop, pause and resume. It is test support: the fault
// tests (test/fault) and the seed's failure case (test/scenario) put a
// Link between two components wherever a fault must be placed.
//
// A Link is a TCP relay from a listener on 127.0.0.1 to a target address.
// Its modes model what a network does to a connection:
//
//   - Cut: every live connection is reset (RST) and new ones are reset as
//     soon as they are accepted — a peer that is gone or a firewall that
//     rejects.
//   - Blackhole: bytes are still accepted from both sides but never
//     delivered, and new connections are accepted without ever reaching
//     the target — a silent partition, noticed only by the peers' own
//     timeouts. Connections that were blackholed are reset when the link
//     is restored, because bytes they carried were lost and the stream
//     cannot continue.
//   - Hold: bytes are buffered in both directions, in order, and
//     delivered only on Release — a write already on the wire that
//     arrives late. Held bytes are delivered even when the sending side
//     has closed the connection in the meantime, as packets in flight
//     would be.
//   - SetDelay: every chunk is delivered that long after it was read —
//     latency, or retransmission after loss.
//   - SetLoss: each chunk read is lost with a probability, from a seeded
//     source so a run can be repeated. A TCP stream cannot lose bytes in
//     the middle and go on, so a loss ends the connection: by default it
//     is reset (a burst of loss long enough for the sender to give up),
//     or with LossStall it silently stops delivering anything (a burst
//     the peers have to detect with their own timeouts).
//
// Every goroutine a Link starts ends by Close.
package netfault
