package queue_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/batonhq/baton/hostlocal"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/queue"
	"github.com/batonhq/baton/session"
)

// startServer starts a nats-server with JetStream on a free loopback port
// for an example. It returns the server's URL, a scratch directory, and
// stop, which shuts the server down and removes the directory.
func startServer() (url, dir string, stop func()) {
	dir, err := os.MkdirTemp("", "baton-example-")
	if err != nil {
		log.Fatal(err)
	}
	ns, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: dir, NoLog: true, NoSigs: true,
	})
	if err != nil {
		log.Fatal(err)
	}
	ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		log.Fatal("nats-server not ready")
	}
	return ns.ClientURL(), dir, func() {
		ns.Shutdown()
		ns.WaitForShutdown()
		os.RemoveAll(dir)
	}
}

// Tasks are added for keys (a repository, a user). A worker runs them one
// key at a time, fairly across keys: a key never served goes before one
// served already, and a key's tasks run in the order they were added.
func ExampleQueues_Add() {
	url, dir, stop := startServer()
	defer stop()
	ctx := context.Background()

	c, err := kv.Connect(ctx, kv.WithURL(url))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	// A key's lock is a session of its slot: the queues take them with a
	// session manager, whose state directory holds this host's join gates
	// (by default ~/.local/state/baton).
	state, err := hostlocal.OpenStateDir(filepath.Join(dir, "state"))
	if err != nil {
		log.Fatal(err)
	}
	m, err := session.NewManager(c, session.WithStateDir(state))
	if err != nil {
		log.Fatal(err)
	}
	qs, err := queue.New(m)
	if err != nil {
		log.Fatal(err)
	}
	// Once per deployment: create the sessions and queues buckets, on one
	// server.
	if err := m.Ensure(ctx, 1); err != nil {
		log.Fatal(err)
	}
	if err := qs.Ensure(ctx, 1); err != nil {
		log.Fatal(err)
	}

	// A queue's config is shared by every worker, on every host.
	cfg := queue.DefaultConfig("builds")
	cfg.MaxActive = 4 // at most four builds at once, across all workers
	if _, _, err := qs.Create(ctx, cfg); err != nil {
		log.Fatal(err)
	}
	for _, t := range []struct{ key, id string }{{"repo-a", "a1"}, {"repo-a", "a2"}, {"repo-b", "b1"}} {
		if _, _, err := qs.Add(ctx, "builds", t.key, []byte("make test"), queue.WithID(t.id)); err != nil {
			log.Fatal(err)
		}
	}
	// Add is idempotent on the task's id: adding a1 again adds nothing.
	_, created, err := qs.Add(ctx, "builds", "repo-a", []byte("make test"), queue.WithID("a1"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("a1 added again:", created)

	// The handler runs while its worker holds the key's lock. The attempt's
	// fence, larger for every later attempt on the key, goes with what the
	// task writes.
	h := queue.HandlerFunc(func(ctx context.Context, t *queue.Task) error {
		fmt.Printf("%s: %s %q, fenced: %v\n", t.Key, t.ID, t.Payload, t.Run.Fence > 0)
		return nil // done; an error would mean "retry"
	})
	// This worker stops after three tasks; Run without WithMaxTasks works
	// until its context ends.
	w, err := qs.NewWorker("builds", h, queue.WithMaxTasks(3))
	if err != nil {
		log.Fatal(err)
	}
	if err := w.Run(ctx); err != nil {
		log.Fatal(err)
	}
	for _, id := range []string{"a1", "a2", "b1"} {
		t, err := qs.Get(ctx, "builds", id)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(id, t.State)
	}
	// Output:
	// a1 added again: false
	// repo-a: a1 "make test", fenced: true
	// repo-b: b1 "make test", fenced: true
	// repo-a: a2 "make test", fenced: true
	// a1 done
	// a2 done
	// b1 done
}

// A handler's error fails the attempt, and the task runs again after the
// queue's backoff, until it is out of attempts. WaitTask follows a task
// until it is in the state the caller waits for.
func ExampleQueues_WaitTask() {
	url, dir, stop := startServer()
	defer stop()
	ctx := context.Background()

	c, err := kv.Connect(ctx, kv.WithURL(url))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	state, err := hostlocal.OpenStateDir(filepath.Join(dir, "state"))
	if err != nil {
		log.Fatal(err)
	}
	m, err := session.NewManager(c, session.WithStateDir(state))
	if err != nil {
		log.Fatal(err)
	}
	qs, err := queue.New(m)
	if err != nil {
		log.Fatal(err)
	}
	if err := m.Ensure(ctx, 1); err != nil {
		log.Fatal(err)
	}
	if err := qs.Ensure(ctx, 1); err != nil {
		log.Fatal(err)
	}
	cfg := queue.DefaultConfig("deploys")
	cfg.Backoff = 0 // retry at once (default: 10s, doubling)
	if _, _, err := qs.Create(ctx, cfg); err != nil {
		log.Fatal(err)
	}

	// The first attempt fails; the second succeeds.
	h := queue.HandlerFunc(func(ctx context.Context, t *queue.Task) error {
		if t.Run.Attempt == 1 {
			return errors.New("registry unavailable")
		}
		return nil
	})
	w, err := qs.NewWorker("deploys", h)
	if err != nil {
		log.Fatal(err)
	}
	wctx, stopWorker := context.WithCancel(ctx)
	worked := make(chan error)
	go func() { worked <- w.Run(wctx) }()

	task, _, err := qs.Add(ctx, "deploys", "prod", []byte("v2.1"))
	if err != nil {
		log.Fatal(err)
	}
	// Wait until the task is final: done, dead or cancelled (a failed task
	// runs again by itself, so it is not).
	task, err = qs.WaitTask(ctx, "deploys", task.ID, func(t *queue.Task) bool { return t.State.Final() })
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(task.State, "after", task.Attempts, "attempts, last one:", task.Result.Reason, *task.Result.ExitCode)

	// Cancelling the worker's context drains it: Run returns once its
	// running tasks have finished (or were put back).
	stopWorker()
	if err := <-worked; err != nil {
		log.Fatal(err)
	}
	// Output:
	// done after 2 attempts, last one: exit 0
}
