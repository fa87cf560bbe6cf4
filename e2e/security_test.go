package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/batonhq/baton/internal/natsctx/natsclitest"
	"github.com/batonhq/baton/kv/kvtest"
)

// upProcess is a `baton up` running as a user runs it.
type upProcess struct {
	url    string
	state  string
	env    []string
	stdout *syncBuffer
	stderr *syncBuffer
}

// upEnv is the environment of a `baton up` of state dir state, plus extra.
func upEnv(state string, extra ...string) []string {
	return append([]string{"PATH=/usr/bin:/bin", "HOME=" + state, "BATON_STATE_DIR=" + state,
		"BATON_HOST_ID=host-a", "GORACE=atexit_sleep_ms=0"}, extra...)
}

// startUp runs `baton up --listen 127.0.0.1:-1 --config conf args...` with
// extra in its environment, waits until it serves and stops it with
// Ctrl-C when the test ends.
func startUp(t *testing.T, conf string, extra []string, args ...string) *upProcess {
	t.Helper()
	return launchUp(t, extra, append([]string{"--config", conf}, args...)...)
}

// launchUp runs `baton up --listen 127.0.0.1:-1 args...` as startUp does.
func launchUp(t *testing.T, extra []string, args ...string) *upProcess {
	t.Helper()
	u := &upProcess{state: t.TempDir(), stdout: &syncBuffer{}, stderr: &syncBuffer{}}
	u.env = upEnv(u.state, extra...)
	cmd := exec.Command(batonBin, append([]string{"up", "--listen", "127.0.0.1:-1"}, args...)...)
	cmd.Env = u.env
	cmd.Stderr = u.stderr
	cmd.WaitDelay = 5 * time.Second
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(interrupt)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	first := make(chan string, 1)
	go func() {
		r := bufio.NewReader(out)
		line, _ := r.ReadString('\n')
		u.stdout.Write([]byte(line))
		first <- line
		io.Copy(u.stdout, r)
	}()
	select {
	case line := <-first:
		f := strings.Fields(line)
		if len(f) < 4 || f[2] != "serving" {
			t.Fatalf("baton up said %q; stderr: %s", line, u.stderr)
		}
		u.url = f[3]
	case <-time.After(30 * time.Second):
		t.Fatalf("baton up did not serve within 30s; stderr: %s", u.stderr)
	}
	return u
}

// upFails runs `baton up --config conf` that must exit, and returns how.
func upFails(t *testing.T, conf string, extra []string, args ...string) result {
	t.Helper()
	state := t.TempDir()
	cmd := exec.Command(batonBin, append([]string{"up", "--listen", "127.0.0.1:-1", "--config", conf}, args...)...)
	cmd.Env = upEnv(state, extra...)
	cmd.WaitDelay = 5 * time.Second
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return result{code: exitCode(err), stdout: out.String(), stderr: errOut.String()}
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("baton up %v kept running: %s", args, errOut.String())
		return result{}
	}
}

// user is a host of the up's state dir that runs baton with extra in its
// environment (and BATON_URL set to the up's URL).
func (u *upProcess) user(t *testing.T, extra ...string) *host {
	return &host{w: &world{t: t, url: u.url}, id: "host-a", state: u.state, env: extra}
}

// serverFile is the up's server.json as it is on disk.
func (u *upProcess) serverFile(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(u.state, "server.json"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func writeFile(t *testing.T, dir, name, text string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// noSecret fails the test if secret shows in any of outputs.
func noSecret(t *testing.T, secret string, outputs map[string]string) {
	t.Helper()
	for what, out := range outputs {
		if strings.Contains(out, secret) {
			t.Errorf("%s shows the secret %q:\n%s", what, secret, out)
		}
	}
}

// prefixUser is a user of a nats-server configuration that may use the
// buckets of one baton prefix and nothing else, with replies on its own
// inbox prefix (README, "Security").
func prefixUser(user, password, prefix, inbox string) string {
	var allow []string
	for _, b := range []string{prefix + "-sessions", prefix + "-leases", prefix + "-queues", prefix + "-limits"} {
		allow = append(allow,
			`"$KV.`+b+`.>"`,
			`"$JS.API.STREAM.INFO.KV_`+b+`"`,
			`"$JS.API.STREAM.MSG.GET.KV_`+b+`"`,
			`"$JS.API.CONSUMER.CREATE.KV_`+b+`.>"`,
			`"$JS.API.CONSUMER.DELETE.KV_`+b+`.>"`,
			`"$JS.FC.KV_`+b+`.>"`)
	}
	// A refused rate take tells the dashboard on baton.<prefix>., which a
	// dashboard run as this user subscribes to.
	allow = append(allow, `"baton.`+prefix+`.>"`)
	return fmt.Sprintf(`{user: %s, password: %q, permissions: {
      publish: {allow: [%s]}
      subscribe: {allow: ["%s.>", "baton.%s.>"]}
    }}`, user, password, strings.Join(allow, ", "), inbox, prefix)
}

// TestSecurity_PrefixUsersCannotTouchEachOthersBuckets: alice may use the
// buckets of prefix a, bob those of b; each is refused the other's, at once
// and with exit 6, and the refused writes change nothing.
func TestSecurity_PrefixUsersCannotTouchEachOthersBuckets(t *testing.T) {
	dir := t.TempDir()
	conf := writeFile(t, dir, "auth.conf", `authorization {
  users: [
    {user: admin, password: admin-pw}
    `+prefixUser("alice", "alice-pw", "a", "_INBOX_alice")+`
    `+prefixUser("bob", "bob-pw", "b", "_INBOX_bob")+`
  ]
}
`)
	up := startUp(t, conf, []string{"NATS_USER=admin", "NATS_PASSWORD=admin-pw"}, "--prefix", "a")
	admin := up.user(t, "NATS_USER=admin", "NATS_PASSWORD=admin-pw")
	admin.must("doctor", "--fix", "--prefix", "b") // creates b's buckets

	// alice's credentials and inbox prefix are in a nats context; bob passes
	// flags, and his inbox prefix in BATON_INBOX_PREFIX.
	natsclitest.Save(t, dir, "alice", "--user", "alice", "--password", "alice-pw", "--inbox-prefix", "_INBOX_alice")
	alice := up.user(t, "XDG_CONFIG_HOME="+dir, "NATS_CONTEXT=alice")
	bob := up.user(t, "BATON_INBOX_PREFIX=_INBOX_bob")
	asBob := func(args ...string) []string {
		return append(args, "--prefix", "b", "--user", "bob", "--password", "bob-pw")
	}

	bob.must(asBob("join", "s", "--task", "T-bob")...)
	bob.must(asBob("lease", "acquire", "k", "--instance", "bob-1", "--ttl", "1m")...)
	before := jsonOf(t, bob.must(asBob("status", "--json")...).stdout)

	// alice works on her own prefix.
	alice.must("join", "s", "--task", "T-alice", "--prefix", "a")
	alice.must("commit", "s", "-m", "halfway", "--prefix", "a")
	if r := alice.must("status", "--prefix", "a"); !strings.Contains(r.stdout, "T-alice") {
		t.Errorf("alice's status of prefix a: %s", r)
	}
	alice.must("lease", "acquire", "k", "--instance", "alice-1", "--prefix", "a")
	alice.must("leader", "k", "--prefix", "a")
	alice.must("run", "r", "--task", "T-run", "--prefix", "a", "--", "true")
	alice.must("doctor", "--prefix", "a")
	alice.must("close", "s", "--prefix", "a")
	alice.must("sem", "create", "db", "--max", "1", "--prefix", "a")
	alice.must("sem", "run", "db", "--prefix", "a", "--", "true")
	alice.must("rate", "create", "api", "--limit", "1/1m", "--prefix", "a")
	alice.must("rate", "take", "api", "--prefix", "a")
	if r := alice.expect(3, []string{"rate", "take", "api", "--prefix", "a"}); strings.Count(strings.TrimSpace(r.stderr), "\n") > 0 {
		t.Errorf("a refused take said more than its refusal:\n%s", r.stderr)
	}
	// The server logs every refusal: none of what she needs was refused.
	if strings.Contains(up.stderr.String(), "Violation") {
		t.Errorf("the server refused alice something on her own prefix:\n%s", up.stderr)
	}

	// Everything alice tries on b is refused at once (the timeout is 20s).
	for _, args := range [][]string{
		{"status"},
		{"status", "--json"},
		{"lease", "get", "k"},
		{"leader", "k"},
		{"doctor"},
		{"join", "s", "--task", "T-alice"},
		{"join", "s", "--task", "T-alice", "--force"},
		{"commit", "s"},
		{"close", "s"},
		{"lease", "acquire", "k", "--instance", "bob-1"},
		{"lease", "release", "k", "--instance", "bob-1"},
		{"run", "s", "--task", "T-alice", "--", "true"},
		{"lead", "k", "--", "true"},
		{"status", "--watch"},
	} {
		start := time.Now()
		r := alice.expect(6, append([]string{"--prefix", "b", "--timeout", "20s"}, args...), "permission denied", "b-")
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("alice %v: refused after %s, want at once", args, d)
		}
		// One error line; long-lived verbs may have said first what their
		// background watches were refused.
		lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
		longLived := args[0] == "run" || args[0] == "lead" || slices.Contains(args, "--watch")
		for _, l := range lines {
			if !strings.HasPrefix(l, "baton: "+args[0]) || !longLived && len(lines) > 1 {
				t.Errorf("alice %v: want one error line, got:\n%s", args, r.stderr)
				break
			}
		}
	}

	// bob's records are as they were.
	unchanged := func(when string) {
		t.Helper()
		after := jsonOf(t, bob.must(asBob("status", "--json")...).stdout)
		for _, kind := range []string{"sessions", "leases"} {
			b, a := before[kind].([]any), after[kind].([]any)
			if len(b) != 1 || len(a) != 1 {
				t.Fatalf("bob's %s %s: before %v, after %v", kind, when, b, a)
			}
			for _, field := range []string{"revision", "fence", "host", "holder", "task_id", "renewals", "instance"} {
				if was, is := fmt.Sprint(b[0].(map[string]any)[field]), fmt.Sprint(a[0].(map[string]any)[field]); was != is {
					t.Errorf("bob's %s %s: %s changed from %s to %s", kind, when, field, was, is)
				}
			}
		}
	}
	unchanged("after alice's verbs")

	// The server itself refuses alice, whatever client she uses.
	errs := make(chan error, 16)
	nc, err := nats.Connect(up.url, nats.UserInfo("alice", "alice-pw"), nats.CustomInboxPrefix("_INBOX_alice"),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errs <- err }))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	refused := func(what, subject string) {
		t.Helper()
		select {
		case err := <-errs:
			if !strings.Contains(err.Error(), "Permissions Violation") || !strings.Contains(err.Error(), `"`+subject+`"`) {
				t.Errorf("%s: %v, want a permissions violation for %s", what, err, subject)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("%s: not refused", what)
		}
	}
	if resp, err := nc.Request("$JS.API.STREAM.INFO.KV_a-sessions", nil, 5*time.Second); err != nil || !strings.Contains(string(resp.Data), `"config"`) {
		t.Fatalf("alice's own stream info: %v", err) // the control: allowed requests work
	}
	if err := nc.Publish("$KV.b-sessions.s", []byte(`{"slot":"s"}`)); err != nil {
		t.Fatal(err)
	}
	refused("publish to b's sessions", "$KV.b-sessions.s")
	if _, err := nc.Request("$JS.API.DIRECT.GET.KV_b-sessions.$KV.b-sessions.s", nil, 500*time.Millisecond); err == nil {
		t.Error("direct get of b's session answered")
	}
	refused("direct get of b's session", "$JS.API.DIRECT.GET.KV_b-sessions.$KV.b-sessions.s")
	if _, err := nc.Request("$JS.API.STREAM.MSG.GET.KV_b-leases", []byte(`{"last_by_subj":"$KV.b-leases.k"}`), 500*time.Millisecond); err == nil {
		t.Error("stream get of b's lease answered")
	}
	refused("stream get of b's lease", "$JS.API.STREAM.MSG.GET.KV_b-leases")
	// Nor may she listen to bob's replies.
	if _, err := nc.SubscribeSync("_INBOX_bob.>"); err != nil {
		t.Fatal(err)
	}
	refused("subscribe to bob's inbox", "_INBOX_bob.>")
	unchanged("after alice's raw requests")
}

// TestSecurity_WrongPasswordIsExit6AndNeverShown, whether the password is
// in a flag, the environment or the URL; and nothing baton prints or writes
// shows a password in use.
func TestSecurity_WrongPasswordIsExit6AndNeverShown(t *testing.T) {
	const adminPW, alicePW, wrongPW = "adm1n-Secr3t", "al1ce-Secr3t", "wr0ng-Secr3t"
	conf := writeFile(t, t.TempDir(), "auth.conf", `authorization {
  users: [ {user: admin, password: $NATS_PASSWORD}, {user: alice, password: "`+alicePW+`"} ]
}
`)
	// up reads the admin's password from the environment, as the server
	// reads it in the file.
	up := startUp(t, conf, []string{"NATS_USER=admin", "NATS_PASSWORD=" + adminPW})
	outputs := map[string]string{"server.json": up.serverFile(t)}
	if strings.HasPrefix(up.url, "nats://admin") || !strings.HasPrefix(up.url, "nats://127.0.0.1:") {
		t.Errorf("up serves %s, want nats://127.0.0.1:PORT", up.url)
	}
	hostport := strings.TrimPrefix(up.url, "nats://")

	anon := up.user(t)
	for name, h := range map[string]*host{
		"env":  up.user(t, "NATS_USER=alice", "NATS_PASSWORD="+wrongPW),
		"flag": anon,
	} {
		args := []string{"status"}
		if name == "flag" {
			args = append(args, "--user", "alice", "--password", wrongPW)
		}
		r := h.expect(6, args, "refused the credentials")
		outputs["wrong password by "+name] = r.stdout + r.stderr
	}
	inURL := up.user(t, "BATON_URL=nats://alice:"+wrongPW+"@"+hostport)
	r := inURL.expect(6, []string{"join", "s", "--task", "T-1"}, "refused the credentials", "nats://***@127.0.0.1")
	outputs["wrong password in the URL"] = r.stdout + r.stderr
	r = anon.expect(6, []string{"status"}, "requires credentials", "--user and --password", "NATS_PASSWORD")
	outputs["no credentials"] = r.stdout + r.stderr

	// Right passwords: nothing shows them either.
	alice := up.user(t, "NATS_USER=alice", "NATS_PASSWORD="+alicePW)
	aliceURL := up.user(t, "BATON_URL=nats://alice:"+alicePW+"@"+hostport)
	for _, run := range []struct {
		h    *host
		args []string
	}{
		{alice, []string{"join", "s", "--task", "T-1", "--agent", "a1"}},
		{alice, []string{"commit", "s", "-m", "halfway"}},
		{aliceURL, []string{"join", "t", "--task", "T-2", "--json"}},
		{alice, []string{"lease", "acquire", "k", "--instance", "i1"}},
		{alice, []string{"status"}},
		{alice, []string{"status", "--json"}},
		{aliceURL, []string{"status", "--json"}},
		{alice, []string{"doctor"}},
		{alice, []string{"doctor", "--json"}},
		{aliceURL, []string{"doctor"}},
		{aliceURL, []string{"doctor", "--json"}},
		{alice, []string{"leader", "k", "--json"}},
		{alice, []string{"run", "r", "--task", "T-3", "--", "sh", "-c", "echo $BATON_SLOT"}},
	} {
		r := run.h.must(run.args...)
		how := "password in the environment: "
		if run.h == aliceURL {
			how = "password in the URL: "
		}
		outputs[how+strings.Join(run.args, " ")] = r.stdout + r.stderr
	}
	outputs["up's output"] = up.stdout.String() + up.stderr.String()
	for _, secret := range []string{adminPW, alicePW, wrongPW} {
		noSecret(t, secret, outputs)
	}
	if out := outputs["password in the URL: doctor"]; !strings.Contains(out, "no problems found on nats://***@127.0.0.1:") {
		t.Errorf("doctor does not show the URL redacted: %s", out)
	}

	// up itself needs credentials for the buckets, and says which.
	r = upFails(t, conf, []string{"NATS_PASSWORD=" + adminPW})
	if r.code != 6 || !strings.Contains(r.stderr, "requires authentication") || !strings.Contains(r.stderr, "--user and --password") {
		t.Errorf("up without credentials: %s, want exit 6 naming --user and --password", r)
	}
	r = upFails(t, conf, []string{"NATS_PASSWORD=" + adminPW}, "--user", "admin", "--password", wrongPW)
	if r.code != 6 || strings.Contains(r.stdout+r.stderr, wrongPW) || strings.Contains(r.stdout+r.stderr, adminPW) {
		t.Errorf("up with a wrong password: %s, want exit 6 without the passwords", r)
	}
}

// TestSecurity_StateDirIsPrivate: after a real up, join, lease and run,
// the state directory and its directories are 0700 and baton's files in it
// (locks, pid files, server.json) 0600.
func TestSecurity_StateDirIsPrivate(t *testing.T) {
	conf := writeFile(t, t.TempDir(), "auth.conf", "authorization { token: t0ken-Secr3t }\n")
	up := startUp(t, conf, []string{"NATS_TOKEN=t0ken-Secr3t"})
	h := up.user(t, "NATS_TOKEN=t0ken-Secr3t")
	h.must("join", "s", "--task", "T-1")
	h.must("lease", "acquire", "k", "--instance", "i1")
	h.must("run", "r", "--task", "T-2", "--", "true")
	files := 0
	err := filepath.WalkDir(up.state, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "jetstream" {
			return fs.SkipDir // nats-server's store, private through its parent
		}
		if d.IsDir() && path == filepath.Join(up.state, ".cache") {
			// HOME is the state directory here: this is the user's cache,
			// where up's full program was copied (ADR 0030; its modes are
			// internal/carry's tests').
			return fs.SkipDir
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		want := os.FileMode(0o600)
		if d.IsDir() {
			want = 0o700
		} else {
			files++
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", path, fi.Mode().Perm(), want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 3 { // server.json, the slot's lock, its pid file
		t.Errorf("only %d files in the state dir: the walk saw nothing", files)
	}
}

// TestSecurity_TokenNKeyAndTLS: a server that requires each kind of
// credential; up and the verbs connect with it, from a flag or the
// environment, and without it a verb is exit 6 saying what to pass.
func TestSecurity_TokenNKeyAndTLS(t *testing.T) {
	t.Run("token", func(t *testing.T) {
		const token = "t0ken-Secr3t"
		conf := writeFile(t, t.TempDir(), "token.conf", "authorization { token: \""+token+"\" }\n")
		up := startUp(t, conf, nil, "--token", token)
		withEnv := up.user(t, "NATS_TOKEN="+token)
		outputs := map[string]string{
			"join":        withEnv.must("join", "s", "--task", "T-1").stdout,
			"status":      up.user(t).must("status", "--json", "--token", token).stdout,
			"doctor":      withEnv.must("doctor", "--json").stdout,
			"server.json": up.serverFile(t),
		}
		r := up.user(t).expect(6, []string{"status"}, "requires credentials", "--token")
		outputs["no token"] = r.stderr
		r = up.user(t, "NATS_TOKEN=wr0ng-"+token).expect(6, []string{"status"}, "refused the credentials")
		outputs["wrong token"] = r.stderr
		outputs["up's output"] = up.stdout.String() + up.stderr.String()
		noSecret(t, token, outputs)
	})

	t.Run("nkey", func(t *testing.T) {
		dir := t.TempDir()
		kp, err := nkeys.CreateUser()
		if err != nil {
			t.Fatal(err)
		}
		pub, _ := kp.PublicKey()
		seed, _ := kp.Seed()
		seedFile := writeFile(t, dir, "user.nk", string(seed))
		conf := writeFile(t, dir, "nkey.conf", "authorization { users: [ {nkey: "+pub+"} ] }\n")
		r := upFails(t, conf, nil)
		if r.code != 6 || !strings.Contains(r.stderr, "--nkey") {
			t.Errorf("up without the nkey: %s, want exit 6 naming --nkey", r)
		}
		up := startUp(t, conf, nil, "--nkey", seedFile)
		up.user(t, "NATS_NKEY="+seedFile).must("join", "s", "--task", "T-1")
		if r := up.user(t).must("status", "--json", "--nkey", seedFile); !strings.Contains(r.stdout, `"T-1"`) {
			t.Errorf("status with --nkey: %s", r)
		}
		up.user(t).expect(6, []string{"status"}, "requires credentials", "--nkey")
		noSecret(t, string(seed), map[string]string{"up's output": up.stdout.String() + up.stderr.String(), "server.json": up.serverFile(t)})
	})

	t.Run("TLS", func(t *testing.T) {
		ca := kvtest.NewCA(t)
		cert, key := ca.ServerCert()
		clientCert, clientKey := ca.ClientCert("alice")
		// Mutual TLS: the server wants a client certificate of its CA.
		conf := writeFile(t, t.TempDir(), "tls.conf", fmt.Sprintf(
			"tls { cert_file: %q, key_file: %q, ca_file: %q, verify: true }\n", cert, key, ca.File))
		r := upFails(t, conf, nil, "--tls-cert", clientCert, "--tls-key", clientKey)
		if r.code != 6 || !strings.Contains(r.stderr, "--tls-ca") {
			t.Errorf("up without the CA: %s, want exit 6 naming --tls-ca", r)
		}
		up := startUp(t, conf, nil, "--tls-ca", ca.File, "--tls-cert", clientCert, "--tls-key", clientKey)
		if !strings.HasPrefix(up.url, "tls://127.0.0.1:") {
			t.Errorf("up serves %s, want tls://127.0.0.1:PORT", up.url)
		}
		var info struct{ URL string }
		if err := json.Unmarshal([]byte(up.serverFile(t)), &info); err != nil || info.URL != up.url {
			t.Errorf("server.json has %q, %v; want %s", info.URL, err, up.url)
		}
		env := up.user(t, "NATS_CA="+ca.File, "NATS_CERT="+clientCert, "NATS_KEY="+clientKey)
		env.must("join", "s", "--task", "T-1")
		if r := up.user(t).must("status", "--json", "--tls-ca", ca.File, "--tls-cert", clientCert, "--tls-key", clientKey); !strings.Contains(r.stdout, `"T-1"`) {
			t.Errorf("status with TLS flags: %s", r)
		}
		up.user(t).expect(6, []string{"status"}, "--tls-ca")
		up.user(t, "NATS_CA="+ca.File).expect(6, []string{"status"}, "--tls-cert")
	})
}

// A symbolic link planted at a gate's path in the state directory (as an
// attacker who can write there would) is refused, never followed: the join
// fails with exit 2 naming it, and the file it points to is untouched.
func TestStateDir_APlantedGateLinkIsRefused(t *testing.T) {
	w := newWorld(t)
	h := w.host("h1")
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("precious\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h.must("join", "warmup", "--task", "T") // the state directory and its locks/ exist
	if err := os.Symlink(victim, filepath.Join(h.state, "locks", "slot-target.lock")); err != nil {
		t.Fatal(err)
	}
	h.expect(2, []string{"join", "target", "--task", "T"}, "symbolic link", "slot-target.lock")
	if b, err := os.ReadFile(victim); err != nil || string(b) != "precious\n" {
		t.Errorf("the file the link points to: %q, %v; want it untouched", b, err)
	}
	if _, ok := h.sessions()["target"]; ok {
		t.Error("a session was joined through a refused gate")
	}
	// doctor reports it among its findings, and --fix leaves it alone.
	for _, args := range [][]string{{"doctor"}, {"doctor", "--fix"}} {
		r := h.baton(args...)
		if r.code != 7 || !strings.Contains(r.stdout, "unusable_gate") || !strings.Contains(r.stdout, "slot-target.lock") || !strings.Contains(r.stdout, "symbolic link") {
			t.Errorf("baton %v: %s; want exit 7 and an unusable_gate finding naming the link", args, r)
		}
	}
	if fi, err := os.Lstat(filepath.Join(h.state, "locks", "slot-target.lock")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("after doctor --fix, the planted link: %v, %v; want it left for a person to look at", fi, err)
	}
}
