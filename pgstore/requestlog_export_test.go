package pgstore

// RequestLogStatements returns the SQL of s's list, get and delete statements, for tests that
// explain them.
func RequestLogStatements(s *RequestLogStore) (list, get, del string) { return s.list, s.get, s.delete }
