package webhook

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/albertofaria/pav/internal/testwait"
)

// A freed slot goes to the clients in turn: a client with one review waiting
// is served before a flooding client's backlog.
func TestFairQueueServesClientsInTurn(t *testing.T) {
	q := newFairQueue(1, 10)
	ctx := context.Background()
	if !q.acquire(ctx, "flood", time.Minute) {
		t.Fatal("first review found no free slot")
	}
	served := make(chan string, 10)
	waitFor := func(client string, n int) {
		testwait.Until(t, fmt.Sprintf("%d reviews of %s waiting", n, client), func() bool { return q.waitingFor(client) >= n })
	}
	start := func(client string) {
		go func() {
			if q.acquire(ctx, client, time.Minute) {
				served <- client
			} else {
				served <- "refused " + client
			}
		}()
	}
	for i := 1; i <= 3; i++ {
		start("flood")
		waitFor("flood", i)
	}
	start("apiserver")
	waitFor("apiserver", 1)

	var order []string
	for range 4 {
		q.release()
		order = append(order, <-served)
	}
	q.release()
	want := []string{"flood", "apiserver", "flood", "flood"}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("served %v, want %v", order, want)
		}
	}
}

// With every place taken, a newcomer displaces the newest review of the
// client with the most waiting; one more from that client is turned away.
func TestFairQueueFullDisplacesTheHeaviestClient(t *testing.T) {
	q := newFairQueue(1, 2)
	ctx := context.Background()
	if !q.acquire(ctx, "flood", time.Minute) {
		t.Fatal("first review found no free slot")
	}
	results := make(chan string, 4)
	for i := 1; i <= 2; i++ {
		go func() {
			if q.acquire(ctx, "flood", time.Minute) {
				results <- "served flood"
			} else {
				results <- "refused flood"
			}
		}()
		for q.waitingFor("flood") < i {
			time.Sleep(time.Millisecond)
		}
	}
	if q.acquire(ctx, "flood", time.Minute) {
		t.Fatal("a third waiting review of the same client got a place in a full queue")
	}
	go func() {
		if q.acquire(ctx, "apiserver", time.Minute) {
			results <- "served apiserver"
		}
	}()
	if got := <-results; got != "refused flood" {
		t.Fatalf("newest flood review: %s, want it turned away for the newcomer", got)
	}
	q.release()
	if got := <-results; got != "served flood" {
		t.Fatalf("first freed slot: %s, want the flood's oldest review (first in turn)", got)
	}
	q.release()
	if got := <-results; got != "served apiserver" {
		t.Fatalf("second freed slot: %s, want the apiserver's review", got)
	}
	q.release()
}

// A review that waits too long gives up its place, and the queue stays consistent.
func TestFairQueueTimeout(t *testing.T) {
	q := newFairQueue(1, 1)
	ctx := context.Background()
	if !q.acquire(ctx, "a", time.Minute) {
		t.Fatal("first review found no free slot")
	}
	if q.acquire(ctx, "b", time.Millisecond) {
		t.Fatal("a review got a slot that was never freed")
	}
	if n := q.waitingFor("b"); n != 0 {
		t.Fatalf("%d reviews of b still waiting after timing out", n)
	}
	q.release()
	if !q.acquire(ctx, "b", time.Minute) {
		t.Fatal("the freed slot was not free")
	}
	q.release()
}

// waitingFor reports how many reviews of client wait (tests wait on it).
func (q *fairQueue) waitingFor(client string) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.lines[client])
}
