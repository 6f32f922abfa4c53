package webhook

import (
	"context"
	"sync"
	"time"
)

// fairQueue hands out a fixed number of slots to reviews, fairly among the
// clients that send them (keyed by remote address). Reviews of one client
// wait in line behind each other; a freed slot goes to the waiting clients in
// turn, so a client that sends many reviews at once (anyone can reach the
// webhook unless client certificates are required) delays another client's
// review by at most one review per slot, not by its whole backlog. When every
// place in the queue is taken, a newcomer takes the place of the newest
// review of the client with the most waiting, if that client has more than
// the newcomer's own; otherwise the newcomer is turned away. It is the
// API server's priority and fairness, reduced to what one webhook needs.
type fairQueue struct {
	slots, places int

	mu      sync.Mutex
	running int
	waiting int
	lines   map[string][]chan bool // per client, oldest first; true: granted, false: turned away
	turn    []string               // clients with reviews waiting, in the order they are served
}

func newFairQueue(slots, places int) *fairQueue {
	return &fairQueue{slots: slots, places: places, lines: map[string][]chan bool{}}
}

// acquire takes a slot for a review of client, waiting for at most wait;
// false: no slot was free in time (or ctx ended, or the review's place went
// to another client's). A true result must be released.
func (q *fairQueue) acquire(ctx context.Context, client string, wait time.Duration) bool {
	q.mu.Lock()
	if q.running < q.slots && q.waiting == 0 {
		q.running++
		q.mu.Unlock()
		return true
	}
	if q.waiting >= q.places && !q.evictFor(client) {
		q.mu.Unlock()
		return false
	}
	ch := make(chan bool, 1)
	if len(q.lines[client]) == 0 {
		q.turn = append(q.turn, client)
	}
	q.lines[client] = append(q.lines[client], ch)
	q.waiting++
	q.mu.Unlock()

	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case granted := <-ch:
		return granted
	case <-timer.C:
	case <-ctx.Done():
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.remove(client, ch) {
		return false
	}
	// Granted or turned away while the timer fired: the answer is in ch.
	return <-ch
}

// release frees a slot and hands it to the next client in turn.
func (q *fairQueue) release() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.running--
	for q.running < q.slots && len(q.turn) > 0 {
		client := q.turn[0]
		q.turn = q.turn[1:]
		line := q.lines[client]
		ch := line[0]
		q.setLine(client, line[1:])
		if len(line) > 1 {
			q.turn = append(q.turn, client)
		}
		q.waiting--
		q.running++
		ch <- true
	}
}

// evictFor turns away the newest review of the client with the most waiting,
// if it has more than client itself; true: a place is free.
func (q *fairQueue) evictFor(client string) bool {
	heaviest := ""
	for c, line := range q.lines {
		if len(line) > len(q.lines[heaviest]) {
			heaviest = c
		}
	}
	line := q.lines[heaviest]
	if len(line) <= len(q.lines[client])+1 {
		return false
	}
	ch := line[len(line)-1]
	q.remove(heaviest, ch)
	ch <- false
	return true
}

// remove takes ch out of client's line; false: it was not there (already
// granted or turned away).
func (q *fairQueue) remove(client string, ch chan bool) bool {
	line := q.lines[client]
	for i, c := range line {
		if c != ch {
			continue
		}
		q.setLine(client, append(line[:i:i], line[i+1:]...))
		q.waiting--
		if len(q.lines[client]) == 0 {
			for j, t := range q.turn {
				if t == client {
					q.turn = append(q.turn[:j:j], q.turn[j+1:]...)
					break
				}
			}
		}
		return true
	}
	return false
}

func (q *fairQueue) setLine(client string, line []chan bool) {
	if len(line) == 0 {
		delete(q.lines, client)
		return
	}
	q.lines[client] = line
}
