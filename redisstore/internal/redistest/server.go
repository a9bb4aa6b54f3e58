package redistest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Server is a redis-server process of one test's own, for the settings a shared server must not be
// given (an eviction policy, a tiny maxmemory, cluster mode). It listens on a free loopback port and
// is killed, and its directory removed, when the test ends.
type Server struct {
	Addr string
	// BusPort is the cluster bus port (cluster nodes only).
	BusPort int
}

// serverBinary finds redis-server. Like Client, it skips when SVC_TEST_REDIS_URL is unset and fails
// when it is set, so that CI, which sets it and installs Redis, never skips these tests.
func serverBinary(tb testing.TB) string {
	tb.Helper()
	path, err := exec.LookPath("redis-server")
	if err == nil {
		return path
	}
	if os.Getenv(EnvURL) == "" {
		tb.Skipf("%s is not set and redis-server is not installed: skipping a test that starts its own Redis", EnvURL)
	}
	tb.Fatalf("redistest: %s is set but redis-server is not on PATH: %v", EnvURL, err)
	return ""
}

// freePorts reserves n distinct free loopback ports. They are held open together and released only
// on return, so that they differ from each other; another process may still take one before the
// server binds it, which StartServer handles by retrying.
func freePorts(tb testing.TB, n int) []int {
	tb.Helper()
	ports := make([]int, n)
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			_ = ln.Close()
		}
	}()
	for i := range ports {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatalf("redistest: reserve a port: %v", err)
		}
		lns = append(lns, ln)
		ports[i] = ln.Addr().(*net.TCPAddr).Port
	}
	return ports
}

// StartServer starts redis-server with args after its own (port, bind, directory, no persistence,
// a log file) and waits until it answers PING. Later args override earlier ones, so args may set
// --save or --appendonly again.
func StartServer(tb testing.TB, args ...string) *Server {
	tb.Helper()
	return startServer(tb, false, args)
}

// startServer retries on a port lost to another process between reservation and bind.
func startServer(tb testing.TB, cluster bool, args []string) *Server {
	tb.Helper()
	bin := serverBinary(tb)
	var lastErr error
	for range 3 {
		s, err := tryStart(tb, bin, cluster, args)
		if err == nil {
			return s
		}
		lastErr = err
	}
	tb.Fatalf("redistest: start redis-server: %v", lastErr)
	return nil
}

func tryStart(tb testing.TB, bin string, cluster bool, args []string) (*Server, error) {
	tb.Helper()
	ports := freePorts(tb, 2)
	dir, err := os.MkdirTemp("", "redistest-")
	if err != nil {
		return nil, err
	}
	s := &Server{Addr: "127.0.0.1:" + strconv.Itoa(ports[0])}
	logFile := filepath.Join(dir, "redis.log")
	all := []string{
		"--port", strconv.Itoa(ports[0]), "--bind", "127.0.0.1", "--dir", dir, "--logfile", logFile,
		"--save", "", "--appendonly", "no", "--daemonize", "no",
	}
	if cluster {
		s.BusPort = ports[1]
		all = append(all, "--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(dir, "nodes.conf"),
			"--cluster-port", strconv.Itoa(ports[1]), "--cluster-node-timeout", "5000")
	}
	cmd := exec.Command(bin, append(all, args...)...)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Start(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop := func() {
		_ = cmd.Process.Kill()
		<-exited
		_ = os.RemoveAll(dir)
	}
	if err := waitReady(s.Addr, exited); err != nil {
		log, _ := os.ReadFile(logFile)
		stop()
		return nil, fmt.Errorf("%w\n%s%s", err, stderr.Bytes(), log)
	}
	tb.Cleanup(stop)
	return s, nil
}

// waitReady polls PING for a bounded time: the server needs a moment to bind.
func waitReady(addr string, exited <-chan error) error {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second})
	defer c.Close()
	var err error
	for range 500 {
		select {
		case werr := <-exited:
			return fmt.Errorf("redis-server on %s exited: %v", addr, werr)
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err = c.Ping(ctx).Err()
		cancel()
		// LOADING and the like are answers too: the server is up.
		if err == nil || isServerReply(err) {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("redis-server on %s did not answer within 5 s: %v", addr, err)
}

func isServerReply(err error) bool {
	var rerr redis.Error
	return errors.As(err, &rerr)
}

// Client returns a client for s, closed when the test ends.
func (s *Server) Client(tb testing.TB) *redis.Client {
	tb.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr, PoolSize: 64})
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// StartCluster starts n redis-server cluster nodes, joins them into a cluster of n masters without
// replicas (redis-cli --cluster create) and waits until every node reports cluster_state:ok and
// knows all n masters. args go to every node.
func StartCluster(tb testing.TB, n int, args ...string) []*Server {
	tb.Helper()
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		serverBinary(tb) // skips or fails as the environment asks
		tb.Fatalf("redistest: redis-server is installed but redis-cli is not: %v", err)
	}
	nodes := make([]*Server, n)
	addrs := make([]string, n)
	for i := range nodes {
		nodes[i] = startServer(tb, true, args)
		addrs[i] = nodes[i].Addr
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	create := append(append([]string{"--cluster", "create"}, addrs...), "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.CommandContext(ctx, cli, create...).CombinedOutput(); err != nil {
		tb.Fatalf("redistest: redis-cli --cluster create: %v\n%s", err, out)
	}
	for _, node := range nodes {
		c := redis.NewClient(&redis.Options{Addr: node.Addr})
		err := waitClusterOK(ctx, c, n)
		_ = c.Close()
		if err != nil {
			tb.Fatalf("redistest: cluster node %s: %v", node.Addr, err)
		}
	}
	return nodes
}

// waitClusterOK polls CLUSTER INFO for a bounded time: the nodes take a few gossip rounds to agree.
func waitClusterOK(ctx context.Context, c *redis.Client, masters int) error {
	var info string
	for ctx.Err() == nil {
		var err error
		info, err = c.ClusterInfo(ctx).Result()
		if err == nil && strings.Contains(info, "cluster_state:ok") &&
			strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(masters)+"\r") &&
			strings.Contains(info, "cluster_size:"+strconv.Itoa(masters)+"\r") {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("not ok within a minute: %s", info)
}
