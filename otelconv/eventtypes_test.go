package otelconv

import (
	"context"
	"strconv"
	"testing"

	"go.opentelemetry.io/otel/attribute"

	"github.com/svcplatform/conventions/apikey"
	"github.com/svcplatform/conventions/webhook/producer"
)

// Issue 30: a sandbox key sent 260 event types through the trigger control, and production's
// order.created was then counted only as _OTHER. Event types come from the declared catalogue
// (Options.EventTypes); unknown ones share one bucket per licensee class, so a sandbox flood never
// pushes a live type out; without a catalogue, each class learns its own types, within its own bound.
func TestEventTypesSandboxFloodLeavesLiveTypesNamed(t *testing.T) {
	sbx := apikey.NewContext(context.Background(), apikey.Principal{Licensee: "lic_eval", Environment: apikey.Sandbox})
	live := apikey.NewContext(context.Background(), apikey.Principal{Licensee: "lic_prod", Environment: apikey.Live})
	for _, tc := range []struct {
		name      string
		catalogue []string
		maxSeries int
	}{
		{"declared catalogue", []string{"order.created", "order.cancelled"}, 2*2 + 2},
		{"no catalogue", nil, 2 * (maxEventTypes + 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, &Options{EventTypes: tc.catalogue})
			obs := h.tel.Producer()
			for i := range 260 {
				obs.EventsAppended(sbx, producer.AppendInfo{Type: "flood." + strconv.Itoa(i), Events: 1})
			}
			obs.EventsAppended(sbx, producer.AppendInfo{Type: "order.created", Events: 1})
			obs.EventsAppended(live, producer.AppendInfo{Type: "order.created", Events: 2})

			liveAttr := attrEnvironment.String(string(apikey.Live))
			sbxAttr := attrEnvironment.String(string(apikey.Sandbox))
			if n := h.sum(t, metricEventsAppended, attrEventType.String("order.created"), liveAttr); n != 2 {
				t.Errorf("live order.created counted %d times by name, want 2", n)
			}
			if n := h.sum(t, metricEventsAppended, attrEventType.String(otherValue), liveAttr); n != 0 {
				t.Errorf("live _OTHER: %d, want 0", n)
			}
			sets := pointSets(h.collect(t)[metricEventsAppended].Data)
			if len(sets) > tc.maxSeries {
				t.Errorf("%d series, want at most %d", len(sets), tc.maxSeries)
			}
			if tc.catalogue != nil {
				if n := h.sum(t, metricEventsAppended, attrEventType.String("order.created"), sbxAttr); n != 1 {
					t.Errorf("sandbox order.created counted %d times by name, want 1", n)
				}
				if n := h.sum(t, metricEventsAppended, attrEventType.String(otherValue), sbxAttr); n != 260 {
					t.Errorf("sandbox _OTHER: %d, want the 260 uncatalogued types in one bucket", n)
				}
				for _, set := range sets {
					v, _ := set.Value(attrEventType)
					if s := v.AsString(); s != "order.created" && s != otherValue {
						t.Errorf("uncatalogued type %q has a series of its own", s)
					}
				}
			}
			// Without a principal (a background job), the class is unknown: its own bucket.
			obs.EventsAppended(context.Background(), producer.AppendInfo{Type: "order.created", Events: 1})
			if n := h.sum(t, metricEventsAppended, attrEventType.String("order.created"), attribute.Key(attrEnvironment).String("")); n != 0 {
				t.Errorf("an empty environment: %d", n)
			}
			if n := h.sum(t, metricEventsAppended, attrEventType.String("order.created")) - h.sum(t, metricEventsAppended, attrEventType.String("order.created"), liveAttr) - h.sum(t, metricEventsAppended, attrEventType.String("order.created"), sbxAttr); n != 1 {
				t.Errorf("order.created without a class: %d, want 1", n)
			}
		})
	}
}
