package server

// SetWake replaces what the server calls once a request's events have committed (the dispatcher's
// Wake), so that a test can see when it is called and what is committed by then.
func SetWake(s *Server, wake func()) { s.wake = wake }
