// Package drivertest is the conformance suite for driver.Log implementations: every implementation runs
// it, under -race, and so keeps the promises the Dispatcher, Publisher and RangeHandler rely on —
// gap-free sequences under racing appends, inclusive ascending ranges with has_more, exclusive leases
// with fencing, and retention that leaves a contiguous window and never reuses a sequence.
//
// # Running it against your log
//
// Call Run from a test in your log's module, with a function that returns an empty log for each call:
//
//	package mylog_test
//
//	import (
//		"testing"
//
//		"github.com/svcplatform/conventions/webhook/producer/driver"
//		"github.com/svcplatform/conventions/webhook/producer/driver/drivertest"
//
//		"example.com/mylog"
//	)
//
//	func TestLog(t *testing.T) {
//		drivertest.Run(t, func(t *testing.T) driver.Log {
//			return mylog.New(connect(t)) // connect: a fresh schema or key prefix per call
//		})
//	}
//
// and then
//
//	go test -race ./...
//
// Each check is a subtest (TestLog/ConcurrentAppendsAreGapFree, …), and a failure is reported under its
// name, saying what was wanted and what came. A log that also implements driver.BatchAppender,
// driver.ByteRanger, driver.Settler, driver.Redeliverer, driver.Sequencing or driver.StatsReader
// gets those subtests too (Stats/…: the windows' counts at chosen instants, the rings' reuse,
// latency buckets, one stream's backlog, and exact totals under racing settlements). RunStreamQuota
// checks a log's bound on the events of a stream; call it with a log built with that bound:
//
//	func TestLogQuota(t *testing.T) {
//		drivertest.RunStreamQuota(t, func(t *testing.T, max int) driver.Log {
//			return mylog.New(connect(t), mylog.Options{MaxStreamEvents: max})
//		}, 0) // 0: no racing appender ever takes a stream past its bound
//	}
//
// RunEndToEnd, part of Run, can also be called alone: it
// drives a producer on the log against the webhook consumer over loopback HTTP with a faulty network.
// RunEndpoints is the suite of endpoint registries (driver.Endpoints that are also
// driver.EndpointLister).
//
// The suite needs nothing but the standard library: it is written on package testing alone, so
// importing it adds no assertion library or other dependency to your module beyond this one.
package drivertest
