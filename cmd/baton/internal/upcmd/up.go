// Package upcmd is `baton up`.
package upcmd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/spf13/cobra"

	"github.com/batonhq/baton/cmd/baton/internal/cmdutil"
	"github.com/batonhq/baton/cmd/baton/internal/cmdutil/dashboard"
	"github.com/batonhq/baton/hostlocal"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/kv/kvserver"
	"github.com/batonhq/baton/lease"
	"github.com/batonhq/baton/queue"
	"github.com/batonhq/baton/rate"
	"github.com/batonhq/baton/reserve"
	"github.com/batonhq/baton/sem"
	"github.com/batonhq/baton/session"
)

// Options are up's inputs.
type Options struct {
	F             *cmdutil.Factory
	Config        string
	Listen        string
	ListenSet     bool
	Store         string
	HTTP          string
	ServerName    string
	ClusterName   string
	ClusterListen string
	Routes        []string
	Replicas      int
	Sync          string
	Verbose       bool
	UI            string
	UIToken       string
	UIReadOnly    bool
	// HandoffTimeout bounds the handoff on stop; 0 stops at once.
	HandoffTimeout time.Duration
}

// NewCmdUp returns `baton up`; runF replaces the run for tests.
func NewCmdUp(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	o := &Options{F: f}
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Run an embedded NATS server with JetStream and baton's buckets",
		Long: `Run a NATS server with JetStream in the foreground, create baton's buckets on
it, and write its URL to <state-dir>/server.json so that other baton commands
on this host find it without flags. It listens on loopback only unless
--listen (or the config file) says otherwise, and stops cleanly on Ctrl-C or
SIGTERM.

With --config FILE it starts from a nats-server configuration file: users and
passwords, tokens, nkeys, accounts, permissions, TLS, limits. --listen,
--store, --sync, --http, --server-name and the cluster flags, when given,
apply on top of it; the file's other settings stand. Where the file names no
host, the server still listens on 127.0.0.1. up's own connection, which
creates the buckets, authenticates with the global flags (--user/--password,
--token, --nkey, --creds, --tls-ca/--tls-cert/--tls-key, or their NATS_*
variables). server.json holds the URL (tls:// when TLS is on) and never a
credential: other commands pass their own.

With --cluster-name, --cluster-listen and --routes it joins a JetStream
cluster, and buckets are kept on --replicas servers (default 3 in a cluster).

On Ctrl-C or SIGTERM, a server of a cluster hands off before it stops, so
that restarting the servers one at a time (an upgrade) waits for no
election and loses no holder: for
each of baton's buckets it waits until enough other servers hold a current
copy for the bucket to do without this one (a server just restarted may
still be catching up), moves the leadership of the buckets it leads to one
of them and waits until that server answers as leader, printing one line per
bucket moved on stderr. Clients of this server then reconnect to another at
once. In a healthy cluster this takes well under a second; --handoff-timeout
bounds it (0: stop at once, as a single server always does), and a second
Ctrl-C or SIGTERM ends it. Past the bound, up says so and stops anyway: the
buckets it still led then wait seconds for an election.

When the disk that holds the store fills up, up says so on stderr; every
write then fails at once (exit 6, "the server's storage is full") while
reads go on, and nothing written before is lost. Once space is freed, up
says so and writes succeed again, without a restart (adr/0034). A server of
a cluster turns its JetStream off instead and the others go on; once space
is freed, up says to restart it, and restarted it catches up.`,
		Example: `  baton up
  baton up --listen 127.0.0.1:4333 --store /var/lib/baton --sync always

  # require a user and password; auth.conf holds (the server reads
  # $NATS_PASSWORD from the environment, as baton does):
  #   authorization { user: admin, password: $NATS_PASSWORD }
  export NATS_USER=admin NATS_PASSWORD=s3cret
  baton up --config auth.conf &
  baton status                     # every command passes the credentials

  # TLS from the file's tls block: the URL is tls://, and every command,
  # up included, verifies the server with the CA
  baton up --config tls.conf --tls-ca ca.pem

  # one of three servers of a cluster
  baton up --listen 0.0.0.0:4222 --server-name n1 --cluster-name baton \
    --cluster-listen 0.0.0.0:6222 --routes nats://h1:6222,nats://h2:6222,nats://h3:6222

  # an upgrade, one server at a time: each hands its buckets off as it stops
  systemctl restart baton-up@n1   # "baton up: handed KV_baton-sessions (bucket baton-sessions) to n2 in 31ms"`,
		Args: cmdutil.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.ListenSet = cmd.Flags().Changed("listen")
			if !cmd.Flags().Changed("ui-token") {
				o.UIToken = f.Getenv(dashboard.TokenEnv)
			}
			if runF != nil {
				return runF(o)
			}
			return upRun(cmd.Context(), o)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.Config, "config", "", "nats-server configuration file: authorization, accounts, TLS, limits (flags given apply on top)")
	fs.StringVar(&o.Listen, "listen", kvserver.DefaultListen, "client listen address HOST:PORT; with --config, the file's unless given")
	fs.StringVar(&o.Store, "store", "", "JetStream store directory (default: the config file's, else <state-dir>/jetstream)")
	fs.StringVar(&o.HTTP, "http", "", "monitoring listen address HOST:PORT (default off)")
	fs.StringVar(&o.ServerName, "server-name", "", "server name, unique in a cluster (default: host id and cluster port)")
	fs.StringVar(&o.ClusterName, "cluster-name", "", "JetStream cluster to form or join")
	fs.StringVar(&o.ClusterListen, "cluster-listen", "", "route listen address HOST:PORT for the cluster")
	fs.StringSliceVar(&o.Routes, "routes", nil, "route URLs of the cluster's servers, comma-separated")
	fs.IntVar(&o.Replicas, "replicas", 0, "servers that hold each bucket (default 1, 3 in a cluster)")
	fs.StringVar(&o.Sync, "sync", "", "fsync policy: always (before every acknowledgement) or an interval like 2m (the default)")
	fs.BoolVar(&o.Verbose, "verbose", false, "log the server's notices, not only its warnings and errors")
	fs.StringVar(&o.UI, "ui", "", "also serve the web dashboard (baton ui) on HOST:PORT, e.g. 127.0.0.1:7070")
	fs.StringVar(&o.UIToken, "ui-token", "", "the dashboard's token (env "+dashboard.TokenEnv+"); needed for --ui beyond loopback unless --ui-read-only")
	fs.BoolVar(&o.UIReadOnly, "ui-read-only", false, "the dashboard shows, never acts")
	fs.DurationVar(&o.HandoffTimeout, "handoff-timeout", 5*time.Second, "in a cluster, how long to wait on stop for other servers to take over this one's buckets (0: stop at once)")
	return cmd
}

// serverOptions turns the flags into the server's options. file is the
// parsed --config file (nil without one): the flags given apply on top of
// it, and its settings otherwise stand.
func (o *Options) serverOptions(store, host string, file *server.Options) ([]kvserver.Option, int, error) {
	opts := []kvserver.Option{kvserver.WithStoreDir(store), kvserver.WithLog(o.F.IO.ErrOut, o.Verbose),
		kvserver.WithDiskEvents(func(e kvserver.DiskEvent) { cmdutil.Fprintf(o.F.IO.ErrOut, "baton up: %s\n", e) })}
	if file != nil {
		opts = append(opts, kvserver.WithConfigFile(o.Config))
	}
	if file == nil || o.ListenSet {
		opts = append(opts, kvserver.WithListen(o.Listen))
	}
	if o.HTTP != "" {
		opts = append(opts, kvserver.WithHTTP(o.HTTP))
	}
	replicas := o.Replicas
	flagCluster := o.ClusterName != "" || o.ClusterListen != "" || len(o.Routes) > 0
	clustered := flagCluster || file != nil && file.Cluster.Port != 0
	name := o.ServerName
	if flagCluster {
		if o.ClusterName == "" || o.ClusterListen == "" {
			return nil, 0, cmdutil.Usagef("a cluster needs --cluster-name and --cluster-listen (and --routes to the other servers)")
		}
		opts = append(opts, kvserver.WithCluster(o.ClusterName, o.ClusterListen, o.Routes))
		if name == "" {
			name = host + "-" + o.ClusterListen[strings.LastIndex(o.ClusterListen, ":")+1:]
		}
	} else if clustered && name == "" && file.ServerName == "" {
		name = host + "-" + strconv.Itoa(file.Cluster.Port)
	}
	if name != "" {
		opts = append(opts, kvserver.WithServerName(name))
	}
	if clustered && replicas == 0 {
		replicas = 3
	}
	if replicas == 0 {
		replicas = 1
	}
	if replicas < 1 || replicas > 5 {
		return nil, 0, cmdutil.Usagef("--replicas %d: use 1 to 5", replicas)
	}
	if replicas > 1 && !clustered {
		return nil, 0, cmdutil.Usagef("--replicas %d needs a cluster: one server holds one copy; add --cluster-name, --cluster-listen and --routes", replicas)
	}
	switch o.Sync {
	case "", "default":
	case "always":
		opts = append(opts, kvserver.WithSyncAlways(true))
	default:
		d, err := time.ParseDuration(o.Sync)
		if err != nil || d <= 0 {
			return nil, 0, cmdutil.Usagef("--sync %q: use always or a positive interval like 30s", o.Sync)
		}
		opts = append(opts, kvserver.WithServerOptions(func(so *server.Options) { so.SyncInterval = d }))
	}
	return opts, replicas, nil
}

func upRun(ctx context.Context, o *Options) error {
	sd, err := o.F.StateDir()
	if err != nil {
		return err
	}
	if info, ok := cmdutil.RunningServer(sd.Path()); ok {
		return cmdutil.Exit(cmdutil.ExitConflict, fmt.Errorf("a baton up already runs for state dir %s (pid %d, %s); stop it first, or pass another --state-dir", sd.Path(), info.PID, info.URL))
	}
	host, err := hostlocal.HostID(o.F.Config.HostID)
	if err != nil {
		return cmdutil.Usagef("--host-id: %v", err)
	}
	var file *server.Options
	if o.Config != "" {
		if file, err = kvserver.ReadConfigFile(o.Config); err != nil {
			return err
		}
	}
	store := o.Store
	if store == "" && (file == nil || file.StoreDir == "") {
		store = filepath.Join(sd.Path(), "jetstream")
	}
	opts, replicas, err := o.serverOptions(store, host, file)
	if err != nil {
		return err
	}
	if o.UI != "" {
		if err := dashboard.CheckListen("--ui", o.UI, o.UIToken, o.UIReadOnly, "--ui-token", "--ui-read-only"); err != nil {
			return err
		}
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	srv, err := kvserver.Start(opts...)
	if err != nil {
		return err
	}
	defer srv.Shutdown()
	url := srv.ClientURL() // tls:// when TLS is on; never credentials
	if store == "" {
		store = file.StoreDir
	}
	client, err := kv.Connect(ctx, append([]kv.Option{kv.WithURL(url), kv.WithName("baton up")}, o.F.ConnectOptions()...)...)
	if errors.Is(err, kv.ErrPermission) && !o.F.HasCredentials() {
		return cmdutil.Exit(cmdutil.ExitUnavailable, fmt.Errorf(
			"the server requires authentication (--config %s) and baton up has no credentials for its own connection, which creates the buckets; pass %s of a user the file allows to create them",
			o.Config, credentialFlags(file)))
	}
	if err != nil {
		return err
	}
	defer client.Close()
	buckets, err := ensureBuckets(ctx, o, client, replicas)
	if errors.Is(err, context.Canceled) {
		cmdutil.Fprintf(o.F.IO.ErrOut, "baton up: stopped before it was ready\n")
		return nil // interrupted: a clean stop
	}
	if err != nil {
		return err
	}
	self, _ := hostlocal.Self()
	infoPath := filepath.Join(sd.Path(), cmdutil.ServerFile)
	if err := kv.WriteServerInfo(infoPath, kv.ServerInfo{
		URL: url, PID: self.PID, PIDStart: self.Start, Store: store, Started: time.Now().UTC(), Replicas: replicas,
	}); err != nil {
		return err
	}
	defer removeIfOurs(infoPath, self.PID)

	if o.F.Config.JSON {
		_ = cmdutil.PrintJSON(o.F.IO.Out, map[string]any{
			"url": url, "store": store, "pid": self.PID, "buckets": buckets, "replicas": replicas, "state_dir": sd.Path(),
		})
	} else {
		cmdutil.Fprintf(o.F.IO.Out, "baton up: serving %s (store %s, buckets %s); Ctrl-C to stop\n", url, store, strings.Join(buckets, ", "))
	}
	if o.UI != "" {
		if err := serveUI(ctx, o, client); err != nil {
			return err
		}
	}
	<-ctx.Done()
	cmdutil.Fprintf(o.F.IO.ErrOut, "baton up: stopping\n")
	if srv.Clustered() && o.HandoffTimeout > 0 {
		handOff(o, srv, client, buckets)
	}
	return nil
}

// handOff hands the buckets this server holds to its peers before it stops
// (kv.Client.HandOff), within --handoff-timeout or until a second signal,
// and says on stderr what it moved and what it could not.
func handOff(o *Options, srv *kvserver.Server, client *kv.Client, buckets []string) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, o.HandoffTimeout)
	defer cancel()
	moved, err := client.HandOff(ctx, srv.Name(), buckets...)
	for _, h := range moved {
		cmdutil.Fprintf(o.F.IO.ErrOut, "baton up: handed %s (bucket %s) to %s in %s\n", h.Stream, h.Bucket, h.To, h.Took.Round(time.Millisecond))
	}
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	for _, err := range errs {
		switch {
		case err == nil:
		case errors.Is(err, context.DeadlineExceeded):
			cmdutil.Fprintf(o.F.IO.ErrOut, "baton up: --handoff-timeout %s passed: %v; stopping anyway\n", o.HandoffTimeout, err)
		case errors.Is(err, context.Canceled):
			cmdutil.Fprintf(o.F.IO.ErrOut, "baton up: handoff interrupted: %v; stopping now\n", err)
		default:
			cmdutil.Fprintf(o.F.IO.ErrOut, "baton up: %v; stopping anyway\n", err)
		}
	}
	if len(moved) == 0 && err == nil {
		cmdutil.Fprintf(o.F.IO.ErrOut, "baton up: no bucket to hand off: other servers lead them all\n")
	}
}

// serveUI serves the dashboard from the server's process, on up's own
// connection, until ctx is done.
func serveUI(ctx context.Context, o *Options, client *kv.Client) error {
	m, err := session.NewManager(client, session.WithPrefix(prefixOf(o)), session.WithHostID(o.F.Config.HostID))
	if err != nil {
		return err
	}
	ls, err := lease.New(client, lease.WithPrefix(prefixOf(o)), lease.WithHostID(o.F.Config.HostID), lease.WithInstance(o.F.Instance()))
	if err != nil {
		return err
	}
	qs, err := queue.New(m)
	if err != nil {
		return err
	}
	ss, err := sem.New(client, sem.WithPrefix(prefixOf(o)), sem.WithHostID(o.F.Config.HostID))
	if err != nil {
		return err
	}
	rl, err := rate.New(client, rate.WithPrefix(prefixOf(o)))
	if err != nil {
		return err
	}
	rs, err := reserve.New(client, reserve.WithPrefix(prefixOf(o)), reserve.WithHostID(o.F.Config.HostID))
	if err != nil {
		return err
	}
	return dashboard.Serve(ctx, o.F, dashboard.Config{Listen: o.UI, Token: o.UIToken, ReadOnly: o.UIReadOnly}, m, ls, qs, ss, rl, rs)
}

// ensureBuckets creates baton's buckets, waiting while JetStream is not
// ready yet (a cluster electing its leader). A bucket with other settings is
// reported, not changed; other errors end the wait.
func ensureBuckets(ctx context.Context, o *Options, client *kv.Client, replicas int) ([]string, error) {
	cfgs := []kv.BucketConfig{session.BucketConfig(prefixOf(o), replicas), lease.BucketConfig(prefixOf(o), replicas), queue.BucketConfig(prefixOf(o), replicas),
		sem.BucketConfig(prefixOf(o), replicas)}
	var names []string
	for _, c := range cfgs {
		names = append(names, c.Name)
	}
	deadline := time.Now().Add(60 * time.Second)
	waiting := false
	for {
		var err error
		for len(cfgs) > 0 && err == nil {
			var me *kv.MismatchError
			if _, err = client.Ensure(ctx, cfgs[0]); errors.As(err, &me) {
				cmdutil.Fprintf(o.F.IO.ErrOut, "%s\n", cmdutil.Message("up", err))
				err = nil
			}
			if err == nil {
				cfgs = cfgs[1:]
			}
		}
		switch {
		case err == nil:
			return names, nil
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case !errors.Is(err, kv.ErrUnavailable) && !errors.Is(err, kv.ErrJetStreamDisabled), cmdutil.JetStreamOffForAccount(err):
			return nil, err
		case time.Now().After(deadline):
			return nil, fmt.Errorf("JetStream not ready after 60s: %w", err)
		}
		if !waiting {
			cmdutil.Fprintf(o.F.IO.ErrOut, "baton up: waiting for JetStream to be ready (a cluster needs its servers up and a leader elected)\n")
			waiting = true
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// credentialFlags names the flags that carry the kinds of credentials the
// config file accepts.
func credentialFlags(file *server.Options) string {
	var kinds []string
	if file != nil {
		if file.Username != "" || len(file.Users) > 0 {
			kinds = append(kinds, "--user and --password (or NATS_USER and NATS_PASSWORD)")
		}
		if file.Authorization != "" {
			kinds = append(kinds, "--token (or NATS_TOKEN)")
		}
		if len(file.Nkeys) > 0 {
			kinds = append(kinds, "--nkey SEED-FILE (or NATS_NKEY)")
		}
		if len(file.TrustedOperators) > 0 || len(file.TrustedKeys) > 0 {
			kinds = append(kinds, "--creds FILE (or NATS_CREDS)")
		}
		if file.TLSMap {
			kinds = append(kinds, "--tls-cert and --tls-key")
		}
	}
	if len(kinds) == 0 {
		return "--user and --password, --token, --nkey, --creds or --context"
	}
	return strings.Join(kinds, ", or ")
}

func prefixOf(o *Options) string {
	if o.F.Config.Prefix != "" {
		return o.F.Config.Prefix
	}
	return session.DefaultPrefix
}

// removeIfOurs removes the server file unless another up wrote it since.
func removeIfOurs(path string, pid int) {
	if info, err := kv.ReadServerInfo(path); err == nil && info.PID == pid {
		_ = os.Remove(path)
	}
}
