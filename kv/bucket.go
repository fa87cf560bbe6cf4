package kv

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/batonhq/baton/internal/names"
)

// BucketConfig is the expected shape of a bucket. Buckets always keep one
// revision per key and store on disk.
type BucketConfig struct {
	// Name of the bucket: letters, digits, '-' and '_'.
	Name string
	// Description shown by NATS tools. Default: none.
	Description string
	// TTL is the bucket-wide TTL counted from each key's last write; 0 means
	// none, so keys live until deleted or until their own TTL runs out.
	// Default: 0.
	TTL time.Duration
	// MarkerTTL is how long delete tombstones and expiry markers stay
	// visible. Setting it (at least 1s) is what lets keys carry their own TTL
	// and lets watchers see expiries. Default: 0, which Ensure rejects.
	MarkerTTL time.Duration
	// Replicas is the number of servers holding the bucket. 0 means "as it
	// is": Ensure creates the bucket with 1, Check does not compare it, and
	// Apply keeps the bucket's current count. Default: 0.
	Replicas int
}

func (cfg BucketConfig) validate() error {
	if !names.Plain(cfg.Name, 0) {
		return fmt.Errorf("%w: bucket name %q: use letters, digits, '-' and '_'", ErrInvalidConfig, cfg.Name)
	}
	if cfg.MarkerTTL < time.Second {
		return fmt.Errorf("%w: bucket %s: marker TTL %s must be at least 1s", ErrInvalidConfig, cfg.Name, cfg.MarkerTTL)
	}
	if cfg.TTL < 0 || cfg.Replicas < 0 || cfg.Replicas > 5 {
		return fmt.Errorf("%w: bucket %s: TTL must be >= 0 and replicas 1-5", ErrInvalidConfig, cfg.Name)
	}
	return nil
}

func (cfg BucketConfig) replicas() int { return max(cfg.Replicas, 1) }

func (cfg BucketConfig) kvConfig() jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{
		Bucket:         cfg.Name,
		Description:    cfg.Description,
		History:        1,
		TTL:            cfg.TTL,
		Storage:        jetstream.FileStorage,
		Replicas:       cfg.replicas(),
		LimitMarkerTTL: cfg.MarkerTTL,
	}
}

// Bucket is a handle on one bucket. Making it costs no round trip; a missing
// bucket shows up as ErrBucketNotFound on the first call.
type Bucket struct {
	c      *Client
	cfg    BucketConfig
	stream string // KV_<name>
	prefix string // $KV.<name>.
	// oneRevision says the server showed the bucket keeping one revision
	// per key (Ensure, LearnHistory): deletes then need no rollup.
	oneRevision atomic.Bool
}

// Bucket returns a handle on the bucket cfg names, without checking that it
// exists or has cfg's settings (see Ensure and Check). On a cluster, the
// client follows the bucket's stream's leader changes from then on (see
// the package doc).
func (c *Client) Bucket(cfg BucketConfig) *Bucket {
	b := &Bucket{c: c, cfg: cfg, stream: "KV_" + cfg.Name, prefix: "$KV." + cfg.Name + "."}
	c.refusals.follow(b.stream)
	return b
}

// Name is the bucket's name.
func (b *Bucket) Name() string { return b.cfg.Name }

// Config is the configuration the handle was made with.
func (b *Bucket) Config() BucketConfig { return b.cfg }

// Client is the client the handle uses.
func (b *Bucket) Client() *Client { return b.c }

// Ensure creates the bucket if it does not exist and returns a handle on it.
// If it exists with other settings, Ensure returns the handle and a
// *MismatchError (ErrBucketMismatch) listing the differences instead of
// using it silently; Apply changes them.
func (c *Client) Ensure(ctx context.Context, cfg BucketConfig) (*Bucket, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	err := c.Check(ctx, cfg)
	if errors.Is(err, ErrBucketNotFound) {
		ctx, cancel := c.callCtx(ctx)
		defer cancel()
		backoff := 50 * time.Millisecond
		for {
			mctx, stop := c.refusals.watch(ctx, apiPrefix, true)
			_, err = c.js.CreateKeyValue(mctx, cfg.kvConfig())
			err = refusal(mctx, err)
			stop()
			var apiErr *jetstream.APIError
			if !errors.As(err, &apiErr) || apiErr.ErrorCode != codeNoPeers {
				break
			}
			// Too few servers of the cluster are known to be up to place
			// the replicas: right after a cluster forms (its meta leader
			// has not heard from every peer yet), or while some are down.
			// Ask again until the call's deadline.
			select {
			case <-ctx.Done():
				return nil, fmt.Errorf("%w: create bucket %s on %s: fewer than %d servers of the cluster are up and known to its leader; start them, or ask for fewer replicas: %w",
					ErrUnavailable, cfg.Name, c.url, cfg.replicas(), err)
			case <-time.After(backoff):
				backoff = min(2*backoff, 500*time.Millisecond)
			}
		}
		if errors.Is(err, jetstream.ErrBucketExists) || errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			err = c.Check(ctx, cfg) // created meanwhile by someone else
		} else if err != nil {
			err = c.apiError("create bucket "+cfg.Name, err)
		}
	}
	if err != nil && !errors.Is(err, ErrBucketMismatch) {
		return nil, err
	}
	b := c.Bucket(cfg)
	b.learn(err)
	return b, err
}

// LearnHistory reads the bucket's settings (Check) for how many revisions
// per key it keeps. A delete through a handle that has seen one (here or
// by Ensure) is a purge without a rollup; otherwise it carries one, which
// the server answers by walking every watch of the bucket, so that a
// bucket whose history was raised by hand still loses the older revisions
// (adr/0038). A long-lived handle that deletes often (a queue worker's)
// calls it once.
func (b *Bucket) LearnHistory(ctx context.Context) error {
	err := b.c.Check(ctx, b.cfg)
	if err != nil && !errors.Is(err, ErrBucketMismatch) {
		return err
	}
	b.learn(err)
	return nil
}

// learn takes what Check said of the bucket (nil or a *MismatchError):
// one revision per key unless the history differs.
func (b *Bucket) learn(checked error) {
	one := true
	var me *MismatchError
	if errors.As(checked, &me) {
		for _, d := range me.Differences {
			one = one && d.Setting != settingHistory
		}
	}
	b.oneRevision.Store(one)
}

// settingHistory names the revisions kept per key in a Difference.
const settingHistory = "history"

// Check compares an existing bucket with cfg. It returns nil when they
// match, a *MismatchError (ErrBucketMismatch) listing the differences, or
// ErrBucketNotFound.
func (c *Client) Check(ctx context.Context, cfg BucketConfig) error {
	info, err := c.streamInfo(ctx, "KV_"+cfg.Name)
	if err != nil {
		return err
	}
	sc := info.Config
	var diffs []Difference
	add := func(setting string, have, want any) {
		diffs = append(diffs, Difference{Setting: setting, Have: fmt.Sprint(have), Want: fmt.Sprint(want)})
	}
	if sc.MaxAge != cfg.TTL {
		add("ttl", durOrNone(sc.MaxAge), durOrNone(cfg.TTL))
	}
	if sc.MaxMsgsPerSubject != 1 {
		add(settingHistory, sc.MaxMsgsPerSubject, 1)
	}
	if !sc.AllowMsgTTL || sc.SubjectDeleteMarkerTTL != cfg.MarkerTTL {
		have := "off"
		if sc.AllowMsgTTL {
			have = durOrNone(sc.SubjectDeleteMarkerTTL)
		}
		add("marker_ttl", have, durOrNone(cfg.MarkerTTL))
	}
	if cfg.Replicas != 0 && sc.Replicas != cfg.Replicas {
		add("replicas", sc.Replicas, cfg.Replicas)
	}
	if sc.Storage != jetstream.FileStorage {
		add("storage", sc.Storage, jetstream.FileStorage)
	}
	if len(diffs) > 0 {
		return &MismatchError{Bucket: cfg.Name, Differences: diffs}
	}
	return nil
}

// Apply changes an existing bucket's settings to cfg (or creates it). Markers
// can be turned on but not off; shortening a TTL expires keys older than it.
// Replicas 0 keeps the bucket's current count.
func (c *Client) Apply(ctx context.Context, cfg BucketConfig) error {
	if err := cfg.validate(); err != nil {
		return err
	}
	if cfg.Replicas == 0 {
		info, err := c.streamInfo(ctx, "KV_"+cfg.Name)
		switch {
		case err == nil:
			cfg.Replicas = info.Config.Replicas
		case !errors.Is(err, ErrBucketNotFound):
			return err
		}
	}
	ctx, cancel := c.callCtx(ctx)
	defer cancel()
	ctx, stop := c.refusals.watch(ctx, apiPrefix, true)
	defer stop()
	if _, err := c.js.CreateOrUpdateKeyValue(ctx, cfg.kvConfig()); err != nil {
		return c.apiError("update bucket "+cfg.Name, refusal(ctx, err))
	}
	return nil
}

// DeleteBucket removes a bucket and everything in it. Missing is not an
// error.
func (c *Client) DeleteBucket(ctx context.Context, name string) error {
	ctx, cancel := c.callCtx(ctx)
	defer cancel()
	ctx, stop := c.refusals.watch(ctx, apiPrefix, true)
	defer stop()
	err := refusal(ctx, c.js.DeleteKeyValue(ctx, name))
	if err == nil || errors.Is(err, jetstream.ErrBucketNotFound) || errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	return c.apiError("delete bucket "+name, err)
}

func durOrNone(d time.Duration) string {
	if d == 0 {
		return "none"
	}
	return d.String()
}
