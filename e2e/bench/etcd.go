package main

import (
	"context"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/stats"
)

// msgCounter counts the gRPC messages a client sends: the etcd side's
// equivalent of a NATS connection's OutMsgs.
type msgCounter struct{ sent atomic.Int64 }

func (c *msgCounter) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }
func (c *msgCounter) HandleRPC(_ context.Context, s stats.RPCStats) {
	if _, ok := s.(*stats.OutPayload); ok {
		c.sent.Add(1)
	}
}
func (c *msgCounter) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }
func (c *msgCounter) HandleConn(context.Context, stats.ConnStats)                       {}

// etcdClient connects to endpoint; counter, if not nil, counts what it sends.
func etcdClient(endpoint string, counter *msgCounter) (*clientv3.Client, error) {
	cfg := clientv3.Config{
		Endpoints:   []string{endpoint},
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	}
	if counter != nil {
		cfg.DialOptions = []grpc.DialOption{grpc.WithStatsHandler(counter)}
	}
	return clientv3.New(cfg)
}
