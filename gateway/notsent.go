package gateway

// clientNotSentLowat bounds the bytes a client connection's socket holds
// not yet sent (TCP_NOTSENT_LOWAT, Linux; see internal/sockopt). Without
// it a writer blocked on the 4 MiB buffer the kernel grows is woken only
// after ~1.3 MiB has drained, so the per-write deadline cut off a client
// reading steadily below ~1.3 MiB per write timeout (47 KiB/s at 30 s) as
// if it had stopped. With it the deadline fails only a client that reads
// under 64 KiB in a write timeout.
const clientNotSentLowat = 128 << 10
