package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// browserPath finds the Chromium that scripts/install-chromium.sh installs.
func browserPath(t *testing.T) string {
	t.Helper()
	for _, b := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless-shell"} {
		if p, err := exec.LookPath(b); err == nil {
			return p
		}
	}
	t.Fatal("no Chromium on PATH: run scripts/install-chromium.sh (make test-tools does)")
	return ""
}

// screenshotDir is where the browser tests leave their screenshots:
// $BATON_SCREENSHOTS (make screenshots sets docs/img), else a temporary
// directory.
func screenshotDir(t *testing.T) string {
	if d := os.Getenv("BATON_SCREENSHOTS"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.TempDir()
}

// startUI runs `baton ui` on h with args and returns its address.
func (h *host) startUI(t *testing.T, args ...string) string {
	t.Helper()
	cmd := h.command(append([]string{"ui", "--listen", "127.0.0.1:0", "--json"}, args...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = &syncBuffer{}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() })
	doc, err := readJSONDoc(bufio.NewReader(out))
	if err != nil {
		t.Fatalf("baton ui printed no address: %v; stderr: %s", err, cmd.Stderr)
	}
	url := doc["url"].(string)
	waitFor(t, 10*time.Second, "the dashboard ready", func() bool {
		resp, err := http.Get(url + "readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return url
}

// browser is a headless Chromium tab.
type browser struct {
	t       *testing.T
	ctx     context.Context
	dialogs atomic.Int32
	shots   string
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(browserPath(t)), chromedp.NoSandbox,
		chromedp.WindowSize(1400, 900), chromedp.Flag("disable-dev-shm-usage", true))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelB := chromedp.NewContext(actx)
	b := &browser{t: t, ctx: ctx, shots: screenshotDir(t)}
	chromedp.ListenTarget(ctx, func(ev any) {
		if _, ok := ev.(*page.EventJavascriptDialogOpening); ok {
			b.dialogs.Add(1)
			go func() { _ = chromedp.Run(ctx, page.HandleJavaScriptDialog(false)) }()
		}
	})
	if err := chromedp.Run(ctx); err != nil {
		cancelB()
		cancelA()
		t.Fatalf("start Chromium: %v", err)
	}
	t.Cleanup(func() { cancelB(); cancelA() })
	return b
}

func (b *browser) run(actions ...chromedp.Action) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Run(ctx, actions...); err != nil {
		b.t.Fatalf("browser: %v", err)
	}
}

// eval evaluates a JavaScript expression in the page.
func (b *browser) eval(expr string, out any) {
	b.t.Helper()
	b.run(chromedp.Evaluate(expr, out))
}

// until evaluates expr until it is true, within d.
func (b *browser) until(d time.Duration, what, expr string) time.Duration {
	b.t.Helper()
	began := time.Now()
	for {
		var ok bool
		b.eval(expr, &ok)
		if ok {
			return time.Since(began)
		}
		if time.Since(began) > d {
			var main string
			b.eval(`document.getElementById('main').innerText`, &main)
			b.t.Fatalf("%s: not within %s; the page shows:\n%s", what, d, main)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// click clicks the element sel names, found and clicked in one step in
// the page (the view's elements are replaced as it updates, so a node
// looked up first may be gone by the click). An element not there yet (the
// page is still applying an update) is waited for, up to 5s.
func (b *browser) click(sel string) {
	b.t.Helper()
	b.until(5*time.Second, "something to click at "+sel,
		fmt.Sprintf(`(() => { const e = document.querySelector(%q); if (!e) return false; e.click(); return true; })()`, sel))
}

func (b *browser) screenshot(name string) {
	b.t.Helper()
	var png []byte
	b.run(chromedp.FullScreenshot(&png, 100))
	if err := os.WriteFile(filepath.Join(b.shots, name), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// badge is the leader the page shows for agent key key ("" for none).
const badgeJS = `(() => { const b = document.querySelector('[data-agent="%s"] [data-testid=badge]'); return b ? (b.dataset.leader || '') : '?'; })()`

func TestUI_InABrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Chromium")
	}
	w := newWorld(t)
	h1, h2, h3 := w.host("host-a"), w.host("host-b"), w.host("host-c")
	url := h1.startUI(t)
	b := newBrowser(t)

	// Three instances of one agent key, on three hosts.
	leads := map[string]*exec.Cmd{}
	for i, h := range []*host{h1, h2, h3} {
		inst := fmt.Sprintf("bot-%d", i+1)
		leads[inst] = h.lead(t, inst, "chat-bot", []string{"--ttl", "3s"}, nil, "sleep", "300")
	}
	waitFor(t, 10*time.Second, "a leader", func() bool { return w.leader(t, "chat-bot") != nil })
	b.run(chromedp.Navigate(url + "#/agents"))
	leader := w.leader(t, "chat-bot").Holder
	b.until(5*time.Second, "the badge names the leader", fmt.Sprintf(badgeJS, "chat-bot")+` === '`+leader+`'`)
	b.until(5*time.Second, "three candidates listed", `document.querySelectorAll('[data-agent="chat-bot"] tr[data-instance]').length === 3`)

	// Make another instance the leader from its menu: the badge moves when
	// the cluster says so, and the CLI agrees.
	var target string
	for inst := range leads {
		if inst != leader {
			target = inst
			break
		}
	}
	row := `[data-agent="chat-bot"] tr[data-instance="` + target + `"]`
	b.click(row + ` [data-testid=menu]`)
	b.until(2*time.Second, "the menu open", `!!document.querySelector('`+row+` [data-testid=make-leader]')`)
	b.screenshot("agents.png")
	b.click(row + ` [data-testid=make-leader]`)
	b.until(10*time.Second, "the badge follows the transfer", fmt.Sprintf(badgeJS, "chat-bot")+` === '`+target+`'`)
	doc := jsonOf(t, h1.must("leader", "chat-bot", "--json").stdout)
	if got := doc["leader"].(map[string]any)["holder"]; got != target {
		t.Fatalf("baton leader names %v after Make leader, want %s", got, target)
	}

	// SIGKILL the leader: the badge moves to another instance within the
	// TTL and a second, with no reload.
	var marker bool
	b.eval(`window.__noReload = true`, &marker)
	killed := time.Now()
	_ = leads[target].Process.Kill()
	b.until(3*time.Second+time.Second, "the badge leaves the killed leader",
		fmt.Sprintf(badgeJS, "chat-bot")+` !== '`+target+`' && `+fmt.Sprintf(badgeJS, "chat-bot")+` !== '' && `+fmt.Sprintf(badgeJS, "chat-bot")+` !== '?'`)
	t.Logf("badge moved %s after the SIGKILL", time.Since(killed).Round(time.Millisecond))
	b.eval(`window.__noReload === true`, &marker)
	if !marker {
		t.Error("the page reloaded to show the new leader")
	}

	// A session joined from the CLI appears without reload, and goes on
	// close. Its task id and meta hold markup: shown as text, never run.
	evil := `<img src=x onerror=alert(1)>`
	b.run(chromedp.Navigate(url + "#/sessions"))
	h2.must("join", "render-7", "--task", evil, "--meta", "note=<script>alert(2)</script>", "--meta", "project=p1")
	h1.must("join", "lint", "--task", "ci-4411", "--agent", "claude-2", "--meta", "project=p2")
	b.until(5*time.Second, "the joined session shown", `!!document.querySelector('tr[data-slot="render-7"]')`)
	var text string
	b.eval(`document.querySelector('tr[data-slot="render-7"]').innerText`, &text)
	if !strings.Contains(text, evil) || !strings.Contains(text, "<script>alert(2)</script>") {
		t.Errorf("the markup is not shown as text: %q", text)
	}
	var imgs, scripts int
	b.eval(`document.querySelectorAll('main img').length`, &imgs)
	b.eval(`document.querySelectorAll('body script').length`, &scripts)
	if imgs != 0 || scripts != 0 || b.dialogs.Load() != 0 {
		t.Errorf("record fields became markup: %d img, %d script in the body, %d dialogs", imgs, scripts, b.dialogs.Load())
	}
	b.screenshot("sessions.png")
	h2.must("close", "render-7")
	b.until(5*time.Second, "the closed session gone", `!document.querySelector('tr[data-slot="render-7"]')`)

	// A queue with work running.
	h1.must("queue", "create", "agents", "--max-active", "2")
	for _, u := range []string{"alice", "bob", "carol"} {
		for n := 1; n <= 2; n++ {
			h1.must("queue", "add", "agents", "--key", u, "--id", fmt.Sprintf("%s-%d", u, n), "--label", "project=p1")
		}
	}
	work := h3.command("queue", "work", "agents", "--concurrency", "2", "--", "sleep", "300")
	work.Stderr = &syncBuffer{}
	if err := work.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = work.Process.Signal(syscall.SIGKILL); _ = work.Wait() })
	b.run(chromedp.Navigate(url + "#/queues"))
	b.until(10*time.Second, "two tasks running in the queue view",
		`(() => { const q = document.querySelector('[data-queue="agents"]'); return !!q && q.querySelectorAll('button').length >= 2 && q.innerText.includes('2 / 2'); })()`)
	// The task list, on demand: running first, then waiting; a waiting
	// task cancelled from its row, as the CLI would.
	b.eval(`document.querySelector('[data-tasks-toggle="agents"]').click()`, nil)
	b.until(10*time.Second, "the task list, running tasks first",
		`(() => { const rows = [...document.querySelectorAll('[data-queue="agents"] tr[data-task]')]; return rows.length === 6 && rows[0].innerText.includes('active') && rows[1].innerText.includes('active'); })()`)
	b.eval(`document.querySelector('tr[data-task="carol-2"] button').click()`, nil)
	b.until(10*time.Second, "carol-2 shown cancelled", `(document.querySelector('tr[data-task="carol-2"]') || {innerText: ''}).innerText.includes('cancelled')`)
	if doc := jsonOf(t, h1.must("queue", "get", "agents", "carol-2", "--json").stdout); doc["state"] != "cancelled" {
		t.Errorf("carol-2 after its Cancel in the page: %v", doc["state"])
	}
	// A task for later, and the queue paused from its panel: the page says
	// both, and the CLI sees the pause.
	h1.must("queue", "add", "agents", "--key", "dave", "--id", "dave-1", "--in", "1h")
	b.click(`[data-pause="agents"]`)
	b.until(10*time.Second, "the queue shown paused",
		`(document.querySelector('[data-queue="agents"] h3') || {innerText: ''}).innerText.includes('paused')`)
	if doc := jsonOf(t, h1.must("queue", "status", "agents", "--json").stdout); doc["paused"] != true {
		t.Errorf("queue status after Pause in the page: paused %v", doc["paused"])
	}
	h1.must("queue", "schedule", "add", "agents", "nightly", "--cron", "0 2 * * *", "--timezone", "Europe/Berlin", "--key", "reports")
	b.until(10*time.Second, "the schedule shown with its next tick",
		`(document.querySelector('tr[data-schedule="nightly"]') || {innerText: ''}).innerText.includes('0 2 * * * (Europe/Berlin)')`)
	h1.must("queue", "config", "agents", "--key-rate", "10/1m")
	h1.must("queue", "key", "set", "agents", "alice", "--weight", "3", "--rate", "30/1m")
	b.until(10*time.Second, "alice's weight and rate shown",
		`(document.querySelector('[data-key-settings="alice"]') || {innerText: ''}).innerText.trim().endsWith('weight 3, rate 30/1m')`)
	b.until(10*time.Second, "the queue's key rate shown",
		`(document.querySelector('[data-key-rate="agents"]') || {innerText: ''}).innerText.trim() === 'key rate 10/1m'`)
	b.until(10*time.Second, "dave-1 shown waiting for its time",
		`(document.querySelector('tr[data-task="dave-1"]') || {innerText: ''}).innerText.includes('runs at')`)
	b.screenshot("queue.png")

	// Limits: a test database shared by three, full, with one waiting in
	// line; a provider's requests and tokens per minute, with a refusal.
	h1.must("sem", "create", "testdb", "--max", "3")
	holders := map[string]*exec.Cmd{}
	for _, hw := range []struct {
		h      *host
		name   string
		weight string
	}{{h1, "big", "2"}, {h2, "small", "1"}} {
		c := hw.h.command("sem", "run", "testdb", "--weight", hw.weight, "--meta", "agent="+hw.name, "--", "sleep", "300")
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		holders[hw.name] = c
		t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
	}
	b.run(chromedp.Navigate(url + "#/limits"))
	b.until(10*time.Second, "both permits shown", `document.querySelectorAll('[data-sem="testdb"] tr[data-permit]').length === 2`)
	waiter := h1.command("sem", "acquire", "testdb", "--wait", "5m", "--json")
	if err := waiter.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = waiter.Process.Kill(); _ = waiter.Wait() })
	b.until(10*time.Second, "the waiter in line", `document.querySelectorAll('[data-sem="testdb"] tr[data-waiter]').length === 1`)
	// A per-host semaphore: each host's share shown apart.
	h1.must("sem", "create", "heavy-tests", "--max", "2", "--per-host")
	for _, h := range []*host{h1, h3} {
		c := h.command("sem", "run", "heavy-tests", "--", "sleep", "300")
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
	}
	b.until(10*time.Second, "each host's share of the per-host semaphore",
		`(() => { const s = document.querySelector('[data-sem="heavy-tests"]'); return !!s && s.querySelectorAll('[data-host]').length === 2 && s.querySelectorAll('tr[data-permit]').length === 2 && s.innerText.includes('on each host'); })()`)
	h1.must("rate", "create", "llm", "--takes", "50/1m", "--limit", "40000/1m")
	b.until(10*time.Second, "the limiter shown", `!!document.querySelector('[data-limiter="llm"]')`)
	for _, cost := range []string{"12000", "9000", "15000"} {
		h2.must("rate", "take", "llm", "--cost", cost)
	}
	h3.expect(3, []string{"rate", "take", "llm", "--cost", "8000"})
	b.until(10*time.Second, "use, admitted and refused shown",
		`(() => { const l = document.querySelector('[data-limiter="llm"]'); return !!l && l.innerText.includes('36000 / 40000') && l.innerText.includes('3 / 50') && l.querySelectorAll('.card')[1].innerText.startsWith('1'); })()`)
	b.screenshot("limits.png")
	// The big holder dies: its units go to the waiter on its host at once,
	// and the page follows without a reload.
	_ = holders["big"].Process.Kill()
	b.until(5*time.Second, "the waiter served",
		`document.querySelectorAll('[data-sem="testdb"] tr[data-waiter]').length === 0 && document.querySelectorAll('[data-sem="testdb"] tr[data-permit]').length === 2`)

	reservationsInTheBrowser(t, b, url, h1, h2, h3)

	b.run(chromedp.Navigate(url + "#/overview"))
	b.until(10*time.Second, "the overview", `document.getElementById('main').innerText.includes('Servers')`)
	b.screenshot("overview.png")
	if n := b.dialogs.Load(); n != 0 {
		t.Errorf("%d dialogs opened", n)
	}
}

func TestUI_ReadOnlyAndListenRules(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Chromium")
	}
	w := newWorld(t)
	h := w.host("host-a")
	h.lead(t, "bot-1", "chat-bot", []string{"--ttl", "3s"}, nil, "sleep", "300")
	h.lead(t, "bot-2", "chat-bot", []string{"--ttl", "3s"}, nil, "sleep", "300")
	url := h.startUI(t, "--read-only")
	b := newBrowser(t)
	b.run(chromedp.Navigate(url + "#/agents"))
	b.until(10*time.Second, "two candidates", `document.querySelectorAll('[data-agent="chat-bot"] tr[data-instance]').length === 2`)
	var buttons int
	b.eval(`document.querySelectorAll('main button').length`, &buttons)
	if buttons != 0 {
		t.Errorf("read-only page shows %d buttons, want none", buttons)
	}
	req, _ := http.NewRequest(http.MethodPost, url+"api/v1/agents/chat-bot/resign", nil)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("read-only resign: %d, want 403", resp.StatusCode)
	}
	// Beyond loopback, without a token or read-only: refused, saying why.
	h.expect(2, []string{"ui", "--listen", "0.0.0.0:0"}, "--ui-token", "--read-only")
	// A cross-site POST to a dashboard that acts is refused.
	url2 := h.startUI(t)
	req, _ = http.NewRequest(http.MethodPost, url2+"api/v1/agents/chat-bot/resign", nil)
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	req.Header.Set("Origin", "https://evil.example")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("cross-site POST: %d, want 403", resp.StatusCode)
	}
}
