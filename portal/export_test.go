package portal

// MemoryStoreLen returns how many entries m holds, expired ones included, for the test of its sweep.
func MemoryStoreLen(m *MemoryStore) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.entries)
}
