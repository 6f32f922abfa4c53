package webhook

import "sync"

// byteBudget bounds the bytes held at once, in all and per client (keyed by
// remote address), so that no client holds more than its share.
type byteBudget struct {
	total, perClient int64

	mu       sync.Mutex
	used     int64
	byClient map[string]int64
}

func newByteBudget(total, perClient int64) *byteBudget {
	return &byteBudget{total: total, perClient: perClient, byClient: map[string]int64{}}
}

// take reserves n bytes for client, without waiting; false: no room.
func (b *byteBudget) take(client string, n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > b.total || b.byClient[client]+n > b.perClient {
		return false
	}
	b.used += n
	b.byClient[client] += n
	return true
}

// give returns n of client's bytes.
func (b *byteBudget) give(client string, n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
	if b.byClient[client] -= n; b.byClient[client] <= 0 {
		delete(b.byClient, client)
	}
}

// heldBy is what client holds (for tests).
func (b *byteBudget) heldBy(client string) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.byClient[client]
}
