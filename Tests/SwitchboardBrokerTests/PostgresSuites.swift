// The suites that work a PostgreSQL server run one test at a time, as one group.
//
// The journal store is synchronous (made for the broker's own thread): a test calling it, or
// `createdb`, `initdb` and `psql`, holds the thread it runs on. Side by side at the start of the
// whole run, these suites held both of the cooperative pool's threads (two cores) for tens of
// seconds at a stretch, and every other suite's timers and sockets waited: pair brokers did not
// serve within 30 s, service requests timed out at 5 s. One at a time, they hold at most one.

import Testing

@Suite("PostgreSQL", .serialized)
enum PostgresSuites {}
