// Package chaos holds iop's fault-injection tests: chaos under load,
// network stalls, slow clients, bad input and security. They put
// internal/faultproxy between nodes and the edge. Everything here is test
// code; chaos/soak is the long-running load tool.
package chaos
