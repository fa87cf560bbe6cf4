package queue

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/batonhq/baton/internal/jsonrec"
	"github.com/batonhq/baton/internal/names"
	"github.com/batonhq/baton/kv"
)

// Defaults of a queue's config.
const (
	// DefaultPerKey: one task of a key runs at a time.
	DefaultPerKey = 1
	// DefaultMaxAttempts: a task runs at most three times.
	DefaultMaxAttempts = 3
	// DefaultTimeout is the longest a task may run.
	DefaultTimeout = time.Hour
	// DefaultTTL is the TTL of the key locks and capacity tokens: a dead
	// worker's task is noticed within it on other hosts.
	DefaultTTL = 30 * time.Second
	// DefaultBackoff is the wait before the first retry of a failed task;
	// it doubles with each further attempt, up to MaxBackoff.
	DefaultBackoff = 10 * time.Second
	// DefaultRetention is how long a finished task (done, dead, cancelled)
	// stays readable before the server removes it.
	DefaultRetention = 24 * time.Hour
)

// Limits.
const (
	// MaxBackoff caps the wait before a retry.
	MaxBackoff = time.Hour
	// MaxPerKey bounds per_key (each lane is a slot of its own).
	MaxPerKey = 1024
	// MaxActiveLimit bounds max_active (each unit is a token record).
	MaxActiveLimit = 1 << 16
	// MaxLabels bounds the labels of a task; keys up to 128 bytes, values
	// up to 1024.
	MaxLabels = 64
)

// Config is a queue's cluster-wide configuration, one record per queue
// (key <queue>.config). Every worker reads it; none has flags of its own
// for what it decides, so two workers never disagree about capacity.
//
//jsonrec:codec
type Config struct {
	Queue string `json:"queue"`
	// MaxActive is how many tasks of the queue run at once across every
	// worker and host; 0 means no limit. Default: 0.
	MaxActive int `json:"max_active"`
	// PerKey is how many tasks of one key run at once. Default: 1.
	PerKey int `json:"per_key"`
	// MaxAttempts is how often a task runs at most; after that many failed
	// or lost attempts it is dead. Default: 3.
	MaxAttempts int `json:"max_attempts"`
	// Timeout is the longest a task may run; a task past it is stopped and
	// failed. Default: 1h.
	Timeout Duration `json:"timeout"`
	// TTL is the time to live of key locks and capacity tokens, renewed
	// every third of it while a task runs: a dead worker's task is noticed
	// within it (at once on the worker's own host). Whole seconds, at least
	// 1s. Default: 30s.
	TTL Duration `json:"ttl"`
	// SlotPrefix is put before a task's key to name its lock's slot (the
	// session that `baton run` and `baton join` use too). Default: none.
	SlotPrefix string `json:"slot_prefix"`
	// Backoff is the wait before a failed task runs again, doubled for
	// each attempt after the first, at most MaxBackoff; 0 retries at once.
	// Default: 10s.
	Backoff Duration `json:"backoff"`
	// Retention is how long a finished task stays readable. Whole
	// seconds, at least 1s. Default: 24h.
	Retention Duration `json:"retention"`
	// Paused stops new starts of the queue's tasks; running ones go on,
	// adds go on (Pause, Resume). Default: false.
	Paused bool `json:"paused,omitempty"`
	// Rate bounds the starts of the queue's tasks: at most Max in any
	// window of Period, by the server's clock (adr/0052). Default: none.
	Rate *RateLimit `json:"rate,omitempty"`
	// KeyRate bounds the starts of each key's tasks the same way, key by
	// key, unless the key has a rate of its own (KeyConfig.Rate;
	// adr/0055). Default: none.
	KeyRate   *RateLimit `json:"key_rate,omitempty"`
	CreatedAt time.Time  `json:"created_at"`
	UpdatedAt time.Time  `json:"updated_at"`

	// Revision is the config record's revision (not stored).
	Revision uint64 `json:"-"`

	unknown jsonrec.Unknown
}

// DefaultConfig is the config of a queue created with no settings.
func DefaultConfig(name string) Config {
	return Config{
		Queue: name, PerKey: DefaultPerKey, MaxAttempts: DefaultMaxAttempts,
		Timeout: Duration(DefaultTimeout), TTL: Duration(DefaultTTL),
		Backoff: Duration(DefaultBackoff), Retention: Duration(DefaultRetention),
	}
}

// configFields is Config without its methods, for encoding/json.
type configFields Config

// MarshalJSON writes the known fields and any unknown ones read earlier.
func (c Config) MarshalJSON() ([]byte, error) {
	if len(c.unknown) == 0 {
		if b, ok := c.encodeFast(); ok {
			return b, nil
		}
	}
	return jsonrec.Marshal(configFields(c), c.unknown)
}

// UnmarshalJSON reads the known fields and keeps the others.
func (c *Config) UnmarshalJSON(data []byte) error {
	if c.decodeFast(data, 0) {
		return nil
	}
	return c.unmarshalGeneral(data)
}

// unmarshalGeneral is UnmarshalJSON for any record, of any version.
func (c *Config) unmarshalGeneral(data []byte) error {
	var f configFields
	unknown, err := jsonrec.Unmarshal(data, &f, configKnown)
	if err != nil {
		return err
	}
	*c = Config(f)
	c.unknown = unknown
	return nil
}

// Validate checks every setting and says the rule of the first that breaks one.
func (c Config) Validate() error {
	if err := ValidateName(c.Queue); err != nil {
		return err
	}
	switch {
	case c.MaxActive < 0 || c.MaxActive > MaxActiveLimit:
		return fmt.Errorf("%w: max_active %d: use 0 (no limit) to %d", ErrInvalid, c.MaxActive, MaxActiveLimit)
	case c.PerKey < 1 || c.PerKey > MaxPerKey:
		return fmt.Errorf("%w: per_key %d: use 1 to %d", ErrInvalid, c.PerKey, MaxPerKey)
	case c.MaxAttempts < 1:
		return fmt.Errorf("%w: max_attempts %d: use 1 or more", ErrInvalid, c.MaxAttempts)
	case c.Timeout <= 0:
		return fmt.Errorf("%w: timeout %s: use a positive duration", ErrInvalid, time.Duration(c.Timeout))
	case c.Backoff < 0:
		return fmt.Errorf("%w: backoff %s: use 0 or a positive duration", ErrInvalid, time.Duration(c.Backoff))
	}
	if err := kv.ValidateTTL(time.Duration(c.TTL)); err != nil {
		return fmt.Errorf("%w: ttl: %w", ErrInvalid, err)
	}
	if err := kv.ValidateTTL(time.Duration(c.Retention)); err != nil {
		return fmt.Errorf("%w: retention: %w", ErrInvalid, err)
	}
	if err := c.Rate.validate("rate"); err != nil {
		return err
	}
	if err := c.KeyRate.validate("key_rate"); err != nil {
		return err
	}
	if c.SlotPrefix != "" {
		if err := kv.ValidateKey(c.SlotPrefix + "x"); err != nil || len(c.SlotPrefix) > 64 {
			return fmt.Errorf("%w: slot_prefix %q: use up to 64 characters of A-Z a-z 0-9 - _ = . not starting with '.' and without '..'", ErrInvalid, c.SlotPrefix)
		}
	}
	return nil
}

// Slot is the session slot of lane (0 to PerKey-1) of key: the slot
// prefix and the key, then "." and the lane for lanes after the first.
func (c Config) Slot(key string, lane int) string {
	if lane == 0 {
		return c.SlotPrefix + key
	}
	return c.SlotPrefix + key + "." + strconv.Itoa(lane)
}

// backoff is the wait before the attempt after the failed attempt n.
func (c Config) backoff(n int) time.Duration {
	d := time.Duration(c.Backoff)
	for i := 1; i < n && d < MaxBackoff; i++ {
		d *= 2
	}
	return min(d, MaxBackoff)
}

// Duration is a time.Duration written as "10s" (it reads a number of
// nanoseconds too).
type Duration = jsonrec.Duration

// RateLimit is at most Max starts in any window of Period.
type RateLimit struct {
	Max    int      `json:"max"`
	Period Duration `json:"period"`
}

// equal reports whether r and o are the same rate (nil: none).
func (r *RateLimit) equal(o *RateLimit) bool {
	return r == nil && o == nil || r != nil && o != nil && *r == *o
}

// validate checks a rate named what (nil: none, valid).
func (r *RateLimit) validate(what string) error {
	if r != nil && (r.Max < 1 || r.Max > MaxRate || time.Duration(r.Period) < time.Millisecond || time.Duration(r.Period) > 24*time.Hour) {
		return fmt.Errorf("%w: %s %s: use 1 to %d starts per period, the period 1ms to 24h", ErrInvalid, what, r, MaxRate)
	}
	return nil
}

// MaxRate bounds RateLimit.Max: the starts of a window are a log in one
// record.
const MaxRate = 10000

func (r *RateLimit) String() string {
	if r == nil {
		return "none"
	}
	return fmt.Sprintf("%d/%s", r.Max, shortDuration(time.Duration(r.Period)))
}

// PeriodText is the period as String writes it (1m, not 1m0s).
func (r *RateLimit) PeriodText() string { return shortDuration(time.Duration(r.Period)) }

// shortDuration is d as time.Duration writes it, without its zero tail:
// 1m, 1h, 1h30m (not 1m0s, 1h0m0s, 1h30m0s).
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// ParseRate reads "N/PERIOD": a count and a duration ("20/1s", "50/1m";
// "20/s", "50/m" and "1000/h" for one of the unit), or "none".
func ParseRate(s string) (*RateLimit, error) {
	if s == "none" || s == "0" {
		return nil, nil
	}
	n, per, ok := strings.Cut(s, "/")
	max, err := strconv.Atoi(n)
	if !ok || err != nil {
		return nil, fmt.Errorf("%w: rate %q: want N/PERIOD, such as 20/1s or 50/1m (or none)", ErrInvalid, s)
	}
	if per == "s" || per == "m" || per == "h" {
		per = "1" + per
	}
	d, err := time.ParseDuration(per)
	if err != nil {
		return nil, fmt.Errorf("%w: rate %q: the period %q is not a duration such as 1s or 1m", ErrInvalid, s, per)
	}
	r := &RateLimit{Max: max, Period: Duration(d)}
	if err := r.validate("rate"); err != nil {
		return nil, err
	}
	return r, nil
}

// NameRule describes valid queue names, for error messages.
const NameRule = "1-64 characters of A-Z a-z 0-9 - _"

// ValidateName checks a queue name against NameRule.
func ValidateName(name string) error {
	if !names.Plain(name, 64) {
		return fmt.Errorf("%w: queue name %q: use %s", ErrInvalid, name, NameRule)
	}
	return nil
}

// BucketConfig is the expected configuration of the queues bucket: no
// bucket TTL (capacity tokens and finished tasks carry their own), one
// revision per key, markers so watchers see expiries.
func BucketConfig(prefix string, replicas int) kv.BucketConfig {
	return kv.BucketConfig{
		Name:        prefix + "-queues",
		Description: "baton work queues: configs, tasks, capacity tokens",
		MarkerTTL:   MarkerTTL,
		Replicas:    replicas,
	}
}

// MarkerTTL is how long the tombstone of a removed record, or the marker
// of an expired one, stays visible.
const MarkerTTL = 5 * time.Minute
