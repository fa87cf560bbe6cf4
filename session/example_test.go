package session_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/batonhq/baton/hostlocal"
	"github.com/batonhq/baton/kv"
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

// A slot has at most one live session. Join takes it; a second join is
// refused, naming the holder; Commit renews it; Close frees it, and the
// next holder gets a larger fence.
func ExampleManager_Join() {
	url, dir, stop := startServer()
	defer stop()
	ctx := context.Background()

	c, err := kv.Connect(ctx, kv.WithURL(url))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	// The state directory holds this host's join gates (by default
	// ~/.local/state/baton).
	state, err := hostlocal.OpenStateDir(filepath.Join(dir, "state"))
	if err != nil {
		log.Fatal(err)
	}
	m, err := session.NewManager(c, session.WithStateDir(state))
	if err != nil {
		log.Fatal(err)
	}
	// Once per deployment: create the sessions bucket, on one server.
	if err := m.Ensure(ctx, 1); err != nil {
		log.Fatal(err)
	}

	s, err := m.Join(ctx, "review-42", "PR-42", session.WithTTL(time.Minute))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("joined", s.Slot, "for", s.TaskID, "with a fence:", s.Fence > 0)

	// The slot is held: a second join is refused and told by whom.
	_, err = m.Join(ctx, "review-42", "PR-43")
	var held *session.HeldError
	if errors.Is(err, session.ErrHeld) && errors.As(err, &held) {
		fmt.Println("second join refused: held for", held.Holder.TaskID)
	}

	// The holder renews the session before its TTL runs out, saying how far
	// it got. Commit returns the new version, to renew or close next.
	s, err = m.Commit(ctx, s, "tests pass")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("renewals:", s.Renewals)

	// Anyone can list the sessions, judged by the server's clock.
	l, err := m.List(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, ls := range l.Sessions {
		fmt.Printf("listed %s (%s): %q\n", ls.Slot, ls.Timing(l.ServerTime, 0).State, ls.Message)
	}

	// Close frees the slot. Whoever joins it next has a larger fence.
	if err := m.Close(ctx, s, session.ResultSuccess); err != nil {
		log.Fatal(err)
	}
	next, err := m.Join(ctx, "review-42", "PR-43")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("joined again, larger fence:", next.Fence > s.Fence)
	if err := m.Close(ctx, next, session.ResultSuccess); err != nil {
		log.Fatal(err)
	}
	// Output:
	// joined review-42 for PR-42 with a fence: true
	// second join refused: held for PR-42
	// renewals: 1
	// listed review-42 (live): "tests pass"
	// joined again, larger fence: true
}

// Every renewal is a compare-and-set on the revision the holder read: a
// holder whose session was replaced learns so at its next Commit, and
// writes nothing.
func ExampleManager_Commit() {
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
	if err := m.Ensure(ctx, 1); err != nil {
		log.Fatal(err)
	}

	old, err := m.Join(ctx, "deploy", "v1")
	if err != nil {
		log.Fatal(err)
	}
	// A forced join on this host replaces the session (sessions of other
	// hosts are never replaced): a new session, with a larger fence.
	cur, err := m.Join(ctx, "deploy", "v2", session.WithForce(true))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("replaced, larger fence:", cur.Fence > old.Fence)

	// The former holder's renewal is refused: its session is lost.
	_, err = m.Commit(ctx, old, "still deploying v1")
	var lost *session.LostError
	if errors.Is(err, session.ErrLost) && errors.As(err, &lost) {
		fmt.Println("old holder's commit refused:", lost.How)
	}
	if err := m.Close(ctx, cur, session.ResultSuccess); err != nil {
		log.Fatal(err)
	}
	// Output:
	// replaced, larger fence: true
	// old holder's commit refused: taken over
}

// Run holds a slot while a command runs: it joins the slot, starts the
// command, renews the session every third of its TTL, and closes it with
// the command's result. Should the session be lost, the command is stopped.
func ExampleManager_Run() {
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
	if err := m.Ensure(ctx, 1); err != nil {
		log.Fatal(err)
	}

	res, err := m.Run(ctx, "nightly", "build-7", func(s *session.Session) (session.Child, error) {
		// The command gets the session's fence, to pass on to what it
		// writes; this one only checks it has one.
		cmd := exec.Command("sh", "-c", `test "$FENCE" -gt 0`)
		cmd.Env = append(os.Environ(), fmt.Sprintf("FENCE=%d", s.Fence))
		// Not "return hostlocal.StartGroup(cmd)": on failure its nil
		// *Group would be a non-nil Child.
		g, err := hostlocal.StartGroup(cmd)
		if err != nil {
			return nil, err
		}
		return g, nil
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("exit code:", res.ExitCode)

	// The run closed the session: the slot is free.
	_, err = m.Get(ctx, "nightly")
	fmt.Println("slot free:", errors.Is(err, session.ErrNotFound))
	// Output:
	// exit code: 0
	// slot free: true
}
