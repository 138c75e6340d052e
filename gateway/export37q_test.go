package gateway

import "time"

// SetAdminTimeout37q shortens the admin endpoints' node round-trip bound
// (15 s in production) for a test that waits it out.
func (s *Server) SetAdminTimeout37q(d time.Duration) { s.adminWait.Store(int64(d)) }
