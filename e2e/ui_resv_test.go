package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// reservationsInTheBrowser is TestUI_InABrowser's Reservations view: agents
// of three hosts reserve paths of a repository, exclusive and shared, two
// wait in line behind them, and another space holds one reservation; the
// view shows each, the waiters in their order, and follows a release that
// hands the paths to the first waiter, without a reload.
func reservationsInTheBrowser(t *testing.T, b *browser, url string, h1, h2, h3 *host) {
	t.Helper()
	const repo = "github.com/acme/app"
	parser := jsonOf(t, h1.must("reserve", repo, "src/parser/**", "docs/api.md", "--agent", "claude-1", "--task", "T-101", "--ttl", "10m", "--json").stdout)
	h2.must("reserve", repo, "README.md", "CHANGELOG.md", "--shared", "--agent", "claude-2", "--task", "T-102", "--ttl", "10m")
	h3.must("reserve", repo, "README.md", "--shared", "--agent", "codex-1", "--task", "T-103", "--ttl", "10m", "--meta", "pr=412")
	h3.must("reserve", "infra", "terraform/**", "--agent", "ops-bot", "--task", "deploy-7", "--ttl", "30m")
	b.run(chromedp.Navigate(url + "#/reservations"))
	space := `[data-space="` + repo + `"]`
	b.until(10*time.Second, "three held", `document.querySelectorAll('`+space+` tr[data-reservation]').length === 3`)

	// Two wait, in this order: the first for the parser, the second to
	// write README.md, which two share.
	for _, w := range []struct {
		h    *host
		args []string
	}{
		{h2, []string{"src/parser/lexer.go", "--agent", "gemini-1", "--task", "T-104"}},
		{h1, []string{"README.md", "--agent", "claude-3", "--task", "T-105"}},
	} {
		c := w.h.command(append([]string{"reserve", repo, "--wait", "5m", "--ttl", "10m"}, w.args...)...)
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
		n := 1
		if w.h == h1 {
			n = 2
		}
		b.until(10*time.Second, fmt.Sprintf("%d waiting", n), fmt.Sprintf(`document.querySelectorAll('%s tr[data-waiter]').length === %d`, space, n))
	}
	var order string
	b.eval(`[...document.querySelectorAll('`+space+` tr[data-waiter]')].map(r => r.children[3].innerText).join(',')`, &order)
	if order != "gemini-1,claude-3" {
		t.Errorf("waiters shown in the order %q, want gemini-1,claude-3", order)
	}
	b.until(5*time.Second, "the spaces listed", `document.querySelectorAll('tr[data-space-row]').length === 2 && !!document.querySelector('[data-space="infra"]')`)
	b.screenshot("reservations.png")

	// claude-1 releases: gemini-1 holds the parser, in the same write.
	h1.must("reserve", "release", repo, parser["id"].(string))
	b.until(10*time.Second, "the first waiter served",
		`document.querySelectorAll('`+space+` tr[data-waiter]').length === 1 && [...document.querySelectorAll('`+space+` tr[data-reservation]')].some(r => r.innerText.includes('gemini-1'))`)
}
