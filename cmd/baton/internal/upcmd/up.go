// Package upcmd is `baton up`.
package upcmd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/spf13/cobra"

	"github.com/batonhq/baton/cmd/baton/internal/cmdutil"
	"github.com/batonhq/baton/hostlocal"
	"github.com/batonhq/baton/kv"
	"github.com/batonhq/baton/lease"
	"github.com/batonhq/baton/session"
)

// Options are up's inputs.
type Options struct {
	F             *cmdutil.Factory
	Listen        string
	Store         string
	HTTP          string
	ServerName    string
	ClusterName   string
	ClusterListen string
	Routes        []string
	Replicas      int
	Sync          string
	Verbose       bool
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
--listen says otherwise, and stops cleanly on Ctrl-C or SIGTERM.

With --cluster-name, --cluster-listen and --routes it joins a JetStream
cluster, and buckets are kept on --replicas servers (default 3 in a cluster).`,
		Example: `  baton up
  baton up --listen 127.0.0.1:4333 --store /var/lib/baton --sync always

  # one of three servers of a cluster
  baton up --listen 0.0.0.0:4222 --server-name n1 --cluster-name baton \
    --cluster-listen 0.0.0.0:6222 --routes nats://h1:6222,nats://h2:6222,nats://h3:6222`,
		Args: cmdutil.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(o)
			}
			return upRun(cmd.Context(), o)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.Listen, "listen", kv.DefaultListen, "client listen address HOST:PORT")
	fs.StringVar(&o.Store, "store", "", "JetStream store directory (default <state-dir>/jetstream)")
	fs.StringVar(&o.HTTP, "http", "", "monitoring listen address HOST:PORT (default off)")
	fs.StringVar(&o.ServerName, "server-name", "", "server name, unique in a cluster (default: host id and cluster port)")
	fs.StringVar(&o.ClusterName, "cluster-name", "", "JetStream cluster to form or join")
	fs.StringVar(&o.ClusterListen, "cluster-listen", "", "route listen address HOST:PORT for the cluster")
	fs.StringSliceVar(&o.Routes, "routes", nil, "route URLs of the cluster's servers, comma-separated")
	fs.IntVar(&o.Replicas, "replicas", 0, "servers that hold each bucket (default 1, 3 in a cluster)")
	fs.StringVar(&o.Sync, "sync", "", "fsync policy: always (before every acknowledgement) or an interval like 2m (the default)")
	fs.BoolVar(&o.Verbose, "verbose", false, "log the server's notices, not only its warnings and errors")
	return cmd
}

func (o *Options) serverOptions(store, host string) ([]kv.ServerOption, int, error) {
	opts := []kv.ServerOption{kv.WithListen(o.Listen), kv.WithStoreDir(store), kv.WithLog(o.F.IO.ErrOut, o.Verbose)}
	if o.HTTP != "" {
		opts = append(opts, kv.WithHTTP(o.HTTP))
	}
	replicas := o.Replicas
	clustered := o.ClusterName != "" || o.ClusterListen != "" || len(o.Routes) > 0
	if clustered {
		if o.ClusterName == "" || o.ClusterListen == "" {
			return nil, 0, cmdutil.Usagef("a cluster needs --cluster-name and --cluster-listen (and --routes to the other servers)")
		}
		name := o.ServerName
		if name == "" {
			name = host + "-" + o.ClusterListen[strings.LastIndex(o.ClusterListen, ":")+1:]
		}
		opts = append(opts, kv.WithServerName(name), kv.WithCluster(o.ClusterName, o.ClusterListen, o.Routes))
		if replicas == 0 {
			replicas = 3
		}
	} else if o.ServerName != "" {
		opts = append(opts, kv.WithServerName(o.ServerName))
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
		opts = append(opts, kv.WithSyncAlways(true))
	default:
		d, err := time.ParseDuration(o.Sync)
		if err != nil || d <= 0 {
			return nil, 0, cmdutil.Usagef("--sync %q: use always or a positive interval like 30s", o.Sync)
		}
		opts = append(opts, kv.WithServerOptions(func(so *server.Options) { so.SyncInterval = d }))
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
	store := o.Store
	if store == "" {
		store = filepath.Join(sd.Path(), "jetstream")
	}
	opts, replicas, err := o.serverOptions(store, host)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	srv, err := kv.StartServer(opts...)
	if err != nil {
		return err
	}
	defer srv.Shutdown()
	url := srv.ClientURL()
	client, err := kv.Connect(ctx, kv.WithURL(url), kv.WithName("baton up"))
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
	<-ctx.Done()
	cmdutil.Fprintf(o.F.IO.ErrOut, "baton up: stopping\n")
	return nil
}

// ensureBuckets creates baton's buckets, waiting while JetStream is not
// ready yet (a cluster electing its leader). A bucket with other settings is
// reported, not changed; other errors end the wait.
func ensureBuckets(ctx context.Context, o *Options, client *kv.Client, replicas int) ([]string, error) {
	cfgs := []kv.BucketConfig{session.BucketConfig(prefixOf(o), replicas), lease.BucketConfig(prefixOf(o), replicas)}
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
		case !errors.Is(err, kv.ErrUnavailable) && !errors.Is(err, kv.ErrJetStreamDisabled):
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
