package queue

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sort"
	"strings"
	"time"

	"github.com/batonhq/baton/internal/jsonrec"
	"github.com/batonhq/baton/kv"
)

// KeyConfig is what a queue holds for one of its keys beyond its tasks
// (key <queue>.key.<key>): written by an operator, read by the dispatcher
// from its watch. A key without one has the queue's settings. JSON fields
// evolve additively: unknown fields are kept when it is rewritten.
//
//jsonrec:codec
type KeyConfig struct {
	Queue string `json:"queue"`
	Key   string `json:"key"`
	// Paused stops new starts of the key's tasks; running ones go on.
	Paused bool `json:"paused"`
	// PerKey, when set, replaces the queue's per_key for this key: how
	// many of its tasks run at once (each under a lane's lock).
	PerKey int `json:"per_key,omitempty"`
	// Weight biases the round robin: a key of weight W is served W times
	// for one turn of a key of weight 1 while both have work (0: 1).
	Weight int `json:"weight,omitempty"`
	// Rate, when set, replaces the queue's key_rate for this key: at most
	// Max of its tasks start in any window of Period (adr/0055).
	Rate      *RateLimit `json:"rate,omitempty"`
	UpdatedAt time.Time  `json:"updated_at"`

	// Revision of the record (not stored; 0: there is none).
	Revision uint64 `json:"-"`

	unknown jsonrec.Unknown
}

// keyConfigFields is KeyConfig without its methods, for encoding/json.
type keyConfigFields KeyConfig

// MarshalJSON writes the known fields and any unknown ones read earlier.
func (k KeyConfig) MarshalJSON() ([]byte, error) {
	if len(k.unknown) == 0 {
		if b, ok := k.encodeFast(); ok {
			return b, nil
		}
	}
	return jsonrec.Marshal(keyConfigFields(k), k.unknown)
}

// UnmarshalJSON reads the known fields and keeps the others.
func (k *KeyConfig) UnmarshalJSON(data []byte) error {
	if k.decodeFast(data, 0) {
		return nil
	}
	var f keyConfigFields
	unknown, err := jsonrec.Unmarshal(data, &f, keyConfigKnown)
	if err != nil {
		return err
	}
	*k = KeyConfig(f)
	k.unknown = unknown
	return nil
}

// plain reports whether k sets nothing: such a record is removed.
func (k KeyConfig) plain() bool {
	return !k.Paused && k.PerKey == 0 && k.Weight <= 1 && k.Rate == nil && len(k.unknown) == 0
}

// MaxWeight bounds KeyConfig.Weight.
const MaxWeight = 100

// validate checks the settings against the rules.
func (k KeyConfig) validate() error {
	switch {
	case k.PerKey < 0 || k.PerKey > MaxPerKey:
		return fmt.Errorf("%w: key %s: per_key %d: use 1 to %d (0: the queue's)", ErrInvalid, k.Key, k.PerKey, MaxPerKey)
	case k.Weight < 0 || k.Weight > MaxWeight:
		return fmt.Errorf("%w: key %s: weight %d: use 1 to %d", ErrInvalid, k.Key, k.Weight, MaxWeight)
	}
	return k.Rate.validate("key " + k.Key + ": rate")
}

// RateOf is the rate that bounds the key's starts under queue config cfg:
// its own, else the queue's key_rate (nil: none).
func (k KeyConfig) RateOf(cfg Config) *RateLimit {
	if k.Rate != nil {
		return k.Rate
	}
	return cfg.KeyRate
}

// Lanes is how many tasks of the key run at once under queue config cfg.
func (k KeyConfig) Lanes(cfg Config) int {
	if k.PerKey > 0 {
		return k.PerKey
	}
	return cfg.PerKey
}

func keyConfigKey(q, key string) string   { return q + ".key." + key }
func isKeyConfigKey(q, key string) bool   { return strings.HasPrefix(key, q+".key.") }
func keyOfKeyConfig(q, key string) string { return strings.TrimPrefix(key, q+".key.") }
func keyConfigPattern(q string) string    { return q + ".key.>" }
func decodeKeyConfig(q string, e kv.Entry) (KeyConfig, error) {
	var k KeyConfig
	if err := k.UnmarshalJSON(e.Value); err != nil {
		return KeyConfig{}, fmt.Errorf("%w: key settings %s: %w", ErrUndecodable, e.Key, err)
	}
	if k.Queue != q || k.Key != keyOfKeyConfig(q, e.Key) {
		return KeyConfig{}, fmt.Errorf("%w: key settings %s name queue %q, key %q", ErrUndecodable, e.Key, k.Queue, k.Key)
	}
	if err := k.validate(); err != nil {
		return KeyConfig{}, fmt.Errorf("%w: key settings %s: %w", ErrUndecodable, e.Key, err)
	}
	k.Revision = e.Revision
	return k, nil
}

// Pause stops new starts of queue q's tasks, on every worker, as soon as
// each sees the config change: the dispatcher offers nothing more and
// takes back what it offered, and a worker claims no offer while the queue
// is paused. Tasks that run go on; adds go on. Pausing a paused queue
// changes nothing.
func (qs *Queues) Pause(ctx context.Context, q string) (Config, error) {
	return qs.SetConfig(ctx, q, func(c *Config) error { c.Paused = true; return nil })
}

// Resume undoes Pause: the queue's tasks start again.
func (qs *Queues) Resume(ctx context.Context, q string) (Config, error) {
	return qs.SetConfig(ctx, q, func(c *Config) error { c.Paused = false; return nil })
}

// PauseKey stops new starts of the tasks of one key of queue q (the other
// keys go on), as Pause does for the queue; a start offered before the
// dispatcher saw the pause may still happen. The key needs no task yet.
func (qs *Queues) PauseKey(ctx context.Context, q, key string) (KeyConfig, error) {
	return qs.SetKey(ctx, q, key, func(k *KeyConfig) error { k.Paused = true; return nil })
}

// ResumeKey undoes PauseKey.
func (qs *Queues) ResumeKey(ctx context.Context, q, key string) (KeyConfig, error) {
	return qs.SetKey(ctx, q, key, func(k *KeyConfig) error { k.Paused = false; return nil })
}

// SetKey changes the settings of key in queue q with fn, by a
// compare-and-set on the revision read (retried if another writer changed
// it meanwhile); settings that set nothing remove the record. It returns
// them as written (Revision 0 once removed).
func (qs *Queues) SetKey(ctx context.Context, q, key string, fn func(*KeyConfig) error) (KeyConfig, error) {
	cfg, err := qs.Config(ctx, q)
	if err != nil {
		return KeyConfig{}, err
	}
	if err := ValidateKey(cfg, key); err != nil {
		return KeyConfig{}, err
	}
	rk := keyConfigKey(q, key)
	for attempt := 1; ; attempt++ {
		cur := KeyConfig{Queue: q, Key: key}
		var last uint64 // the tombstone a create follows (0: none known)
		e, err := qs.bucket.Latest(ctx, rk)
		switch {
		case errors.Is(err, kv.ErrNotFound):
		case err != nil:
			return KeyConfig{}, err
		case e.Live():
			if cur, err = decodeKeyConfig(q, e); err != nil {
				// Garbage is written over: what is set now is the key's.
				cur = KeyConfig{Queue: q, Key: key, Revision: e.Revision}
			}
		default:
			last = e.Revision
		}
		next := cur
		next.unknown = maps.Clone(cur.unknown)
		if err := fn(&next); err != nil {
			return KeyConfig{}, err
		}
		next.Queue, next.Key = q, key
		if err := next.validate(); err != nil {
			return KeyConfig{}, err
		}
		if next.PerKey > 0 {
			if err := ValidateKey(Config{SlotPrefix: cfg.SlotPrefix, PerKey: next.PerKey}, key); err != nil {
				return KeyConfig{}, err
			}
		}
		next.UpdatedAt = qs.now().UTC()
		switch {
		case next.plain() && cur.Revision == 0:
			return next, nil // nothing to write, nothing to remove
		case next.plain():
			err = qs.bucket.Delete(ctx, rk, cur.Revision, nil)
			next.Revision = 0
		default:
			var data []byte
			if data, err = next.MarshalJSON(); err != nil {
				return KeyConfig{}, err
			}
			if cur.Revision == 0 {
				next.Revision, err = qs.bucket.CreateAfter(ctx, rk, data, 0, last)
			} else {
				next.Revision, err = qs.bucket.Update(ctx, rk, data, 0, cur.Revision)
			}
		}
		if err == nil {
			return next, nil
		}
		if !errors.Is(err, kv.ErrConflict) || attempt == 4 {
			return KeyConfig{}, err
		}
	}
}

// Keys lists the keys of queue q that have settings of their own, sorted;
// records that do not decode are returned as errors beside them.
func (qs *Queues) Keys(ctx context.Context, q string) ([]KeyConfig, []error, error) {
	if _, err := qs.Config(ctx, q); err != nil {
		return nil, nil, err
	}
	entries, err := qs.bucket.ListMatching(ctx, keyConfigPattern(q))
	if err != nil {
		return nil, nil, err
	}
	var out []KeyConfig
	var bad []error
	for _, e := range entries {
		k, err := decodeKeyConfig(q, e)
		if err != nil {
			bad = append(bad, err)
			continue
		}
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, bad, nil
}
