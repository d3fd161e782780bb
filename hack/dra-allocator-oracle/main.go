// Command dra-allocator-oracle runs upstream's structured DRA allocator (k8s.io/dynamic-resource-allocation, the one
// kube-scheduler v1.36.3's DynamicResources plugin calls) on a batch of cases read from stdin as JSON, and writes one
// answer per case to stdout: the []AllocationResult as the API serializes it, null when the claims do not fit the
// node, {"error": "..."} with the allocator's error text, or {"aborted": "..."} when the search ran past -timeout
// (upstream's search is exponential in the worst case; kube-scheduler bounds it with its filter timeout, so a case
// that takes that long says nothing about the answer and the test leaves it out). tests/test_dra_allocator_oracle.py feeds it random cases
// and compares each answer with accelsched/dra/allocator.py's, so the two allocators are held to the same results.
//
// A case: the node (name and labels), DeviceClasses, ResourceSlices, the claims to allocate together, and what
// other claims already hold: dedicated devices ("allocated", [driver, pool, device]) and shares of
// allowMultipleAllocations devices ("shared": the device, a share UID and the capacity that share consumes).
// The allocator features are those kube-scheduler v1.36.3 enables by default for them (AllocatorFeatures in
// pkg/scheduler/framework/plugins/dynamicresources), with the beta/alpha DRA gates accelsched models turned on.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
)

type share struct {
	ID       [3]string                            `json:"id"`
	Share    string                               `json:"share"`
	Consumed map[resourceapi.QualifiedName]string `json:"consumed"`
}

type input struct {
	Node      string                       `json:"node"`
	Labels    map[string]string            `json:"labels"`
	Classes   []*resourceapi.DeviceClass   `json:"classes"`
	Slices    []*resourceapi.ResourceSlice `json:"slices"`
	Claims    []*resourceapi.ResourceClaim `json:"claims"`
	Allocated [][3]string                  `json:"allocated"`
	Shared    []share                      `json:"shared"`
}

// classes is the DeviceClassLister the allocator looks classes up in; a missing one is NotFound, as from the API.
type classes map[string]*resourceapi.DeviceClass

func (c classes) List() ([]*resourceapi.DeviceClass, error) { return nil, nil }
func (c classes) Get(name string) (*resourceapi.DeviceClass, error) {
	if class, ok := c[name]; ok {
		return class, nil
	}
	return nil, apierrors.NewNotFound(resourceapi.Resource("deviceclass"), name)
}

var features = structured.Features{
	AdminAccess:            true,
	ConsumableCapacity:     true,
	DeviceBindingAndStatus: true,
	DeviceTaints:           true,
	PartitionableDevices:   true,
	PrioritizedList:        true,
}

func allocatedState(in input) (structured.AllocatedState, error) {
	state := structured.AllocatedState{
		AllocatedDevices:         sets.New[structured.DeviceID](),
		AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](),
		AggregatedCapacity:       structured.NewConsumedCapacityCollection(),
	}
	for _, a := range in.Allocated {
		state.AllocatedDevices.Insert(structured.MakeDeviceID(a[0], a[1], a[2]))
	}
	for _, sh := range in.Shared {
		id := structured.MakeDeviceID(sh.ID[0], sh.ID[1], sh.ID[2])
		uid := types.UID(sh.Share)
		state.AllocatedSharedDeviceIDs.Insert(structured.MakeSharedDeviceID(id, &uid))
		if len(sh.Consumed) == 0 {
			continue
		}
		consumed := map[resourceapi.QualifiedName]resource.Quantity{}
		for name, text := range sh.Consumed {
			q, err := resource.ParseQuantity(text)
			if err != nil {
				return state, fmt.Errorf("shared %v: capacity %s: %w", sh.ID, name, err)
			}
			consumed[name] = q
		}
		state.AggregatedCapacity.Insert(structured.NewDeviceConsumedCapacity(id, consumed))
	}
	return state, nil
}

func allocate(parent context.Context, timeout time.Duration, cache *cel.Cache, in input) (any, error) {
	ctx := parent
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(parent, timeout)
		defer cancel()
	}
	lister := classes{}
	for _, c := range in.Classes {
		lister[c.Name] = c
	}
	state, err := allocatedState(in)
	if err != nil {
		return nil, err
	}
	alloc, err := structured.NewAllocator(ctx, features, state, lister, in.Slices, cache)
	if err != nil {
		return nil, err
	}
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: in.Node, Labels: in.Labels}}
	res, err := alloc.Allocate(ctx, node, in.Claims)
	if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return map[string]string{"aborted": err.Error()}, nil
	}
	if err != nil {
		return map[string]string{"error": err.Error()}, nil
	}
	if res == nil {
		return nil, nil
	}
	return res, nil
}

func main() {
	timeout := flag.Duration("timeout", 0, "abandon a case whose search takes longer (0: never)")
	flag.Parse()
	var cases []input
	if err := json.NewDecoder(os.Stdin).Decode(&cases); err != nil {
		fmt.Fprintln(os.Stderr, "dra-allocator-oracle: reading the cases:", err)
		os.Exit(2)
	}
	ctx := context.Background()
	cache := cel.NewCache(100, cel.Features{EnableConsumableCapacity: true})
	out := make([]any, 0, len(cases))
	for i, in := range cases {
		answer, err := allocate(ctx, *timeout, cache, in)
		if err != nil {
			fmt.Fprintf(os.Stderr, "dra-allocator-oracle: case %d: %v\n", i, err)
			os.Exit(2)
		}
		out = append(out, answer)
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		fmt.Fprintln(os.Stderr, "dra-allocator-oracle:", err)
		os.Exit(1)
	}
}
