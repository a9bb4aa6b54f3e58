package pgstore

import (
	"embed"
	"io/fs"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

//go:embed sql/eventlog
var evlogFilesForTest embed.FS

// TestEventLogStatementFiles: every statement of every file of sql/eventlog is one the log holds,
// and each renders whole — every placeholder filled, names quoted and qualified, no comment left to
// send.
func TestEventLogStatementFiles(t *testing.T) {
	used := make(map[string]bool)
	for _, bounded := range []bool{false, true} {
		opts := &EventLogOptions{Schema: `odd "schema"`, Table: "it's"}
		if bounded {
			opts.MaxStreamEvents = 10
		}
		l, err := NewEventLog(struct{ DB }{}, opts)
		require.NoError(t, err)
		for _, st := range l.sql.statements(bounded) {
			used[st.file+" "+st.name] = true
			require.NotEmpty(t, *st.dst, st.name)
			require.NotContains(t, *st.dst, "{{", st.name)
			require.NotContains(t, *st.dst, "--", st.name)
			require.Contains(t, *st.dst, `"odd ""schema"""."it's`, "%s: the names, qualified and quoted", st.name)
			require.Equal(t, strings.TrimSpace(*st.dst), *st.dst, st.name)
		}
	}
	names := regexp.MustCompile(`(?m)^-- name: (\S+)$`)
	require.NoError(t, fs.WalkDir(evlogFilesForTest, "sql/eventlog", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(evlogFilesForTest, path)
		require.NoError(t, err)
		found := names.FindAllStringSubmatch(string(b), -1)
		require.NotEmpty(t, found, path)
		for _, m := range found {
			require.True(t, used[d.Name()+" "+m[1]], "%s: %s is no statement of the event log", path, m[1])
		}
		return nil
	}))
}

// TestNewEventLogAllocations: some build a log per transaction (Publisher.WithLog on a pgx.Tx); its
// statements cost one string, not one each (built from literals, they cost fifteen), whatever the
// names.
func TestNewEventLogAllocations(t *testing.T) {
	for _, opts := range []*EventLogOptions{nil, {Schema: "a_schema_with_a_long_name", Table: "and_a_long_table_name", MaxStreamEvents: 5}} {
		o := evlogResolve(opts)
		var q evlogSQL
		n := testing.AllocsPerRun(50, func() { require.NoError(t, q.render(&o)) })
		require.Equal(t, 1.0, n)
	}
}

func BenchmarkNewEventLog(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_, _ = NewEventLog(struct{ DB }{}, nil)
	}
}
