package taskpool

import (
	"fmt"
	"slices"
	"strings"
)

// Input is what Decide reads: the pool's entries by state, the task ids
// claimed (a run under way or being adopted), the queue this watcher
// serves, how many more tasks it may start now, and, for a dependency that
// is done, why it does not count yet ("" when it does).
type Input struct {
	Entries map[string][]Entry // by state (Pool.All)
	Claimed map[string]bool    // task id → claimed
	Queue   string             // the watcher's queue selector
	Free    int                // tasks it may start now
	// Unmerged says why a done dependency does not count yet: its run
	// opened a pull request that is not merged ("" = it counts).
	Unmerged func(id string) string
}

// Decision is what Decide says of one pending task.
type Decision struct {
	Entry Entry
	// Claimed: a watcher has it (its run under way).
	Claimed bool
	// Waits says why the task is not taken now: "depends_on X",
	// "queue other", "queue full" ("" when it is taken or refused).
	Waits string
	// Refuse, when set, is why the task can never run as written (a
	// depends_on cycle or an unknown id): it goes to failed/ with it.
	Refuse string
}

// Plan is Decide's answer.
type Plan struct {
	// Next are the tasks to claim now, in order.
	Next []Entry
	// Pending is every valid pending task, in the order the pool would
	// take them, with its decision.
	Pending []Decision
	// Invalid are the pending files whose front matter does not parse:
	// never claimed, read again next tick.
	Invalid []Entry
}

// rank orders high before mid before low.
func rank(priority string) int { return slices.Index(Priorities, priority) }

// Decide applies the pool's rules (README.md § Task pool, after worc
// configuration.md § orchestrator and its task fields): a pending task is
// taken when its queue is the watcher's, no watcher has claimed it, and
// every id in its depends_on is done (with its pull request merged, when
// its run opened one); among those, high before mid before low, ties in
// natural file name order, up to Free. depends_on is always stronger than
// priority: a high task waits for the low one it depends on. A task in a
// depends_on cycle, or naming an id no task of the pool has, is refused, and
// so is a pending file whose id an earlier one (in natural file name order)
// has. A pending file named as a file of done/ or failed/ of another task
// waits ("file name taken"): moving it would replace that task's file.
func Decide(in Input) Plan {
	var plan Plan
	where := map[string]string{} // id → state
	for _, s := range []string{Done, Failed, Preparing, Pending} {
		for _, e := range in.Entries[s] {
			if e.Task != nil {
				if _, seen := where[e.Task.ID]; !seen || s == Done {
					where[e.Task.ID] = s
				}
			}
		}
	}
	// The files done/ and failed/ hold, by name: a pending file of the
	// same name and another id would replace one when it is moved.
	taken := map[string]Entry{}
	for _, st := range []string{Done, Failed} {
		for _, e := range in.Entries[st] {
			taken[e.File] = e
		}
	}
	var pending []Entry
	deps := map[string][]string{}
	first := map[string]string{} // id → the first pending file of it, in natural order
	for _, e := range in.Entries[Pending] {
		if e.Task == nil {
			plan.Invalid = append(plan.Invalid, e)
			continue
		}
		pending = append(pending, e)
		if _, dup := first[e.Task.ID]; !dup {
			first[e.Task.ID] = e.File
			deps[e.Task.ID] = e.DependsOn()
		}
	}
	// Priority first, then the file name; depends_on then holds a task
	// back wherever it stands.
	slices.SortStableFunc(pending, func(a, b Entry) int {
		if c := rank(a.Priority()) - rank(b.Priority()); c != 0 {
			return c
		}
		return NaturalCompare(a.File, b.File)
	})
	free := in.Free
	for _, e := range pending {
		d := Decision{Entry: e}
		id := e.Task.ID
		switch {
		case first[id] != e.File:
			// One id, one task: the later file never runs (it would run the
			// task twice, and its summary would take the other's place).
			d.Refuse = fmt.Sprintf("task id %s is %s's too: the ids of a pool's tasks are unique; give this task another id", id, first[id])
		case in.Claimed[id]:
			d.Claimed = true
		case taken[e.File].Task != nil && taken[e.File].ID() != id:
			o := taken[e.File]
			d.Waits = fmt.Sprintf("file name taken: %s/%s is task %s's; rename this file", o.State, o.File, o.ID())
		case e.Queue() != in.Queue:
			// Another watcher's task: not ours to take, nor to refuse.
			d.Waits = "queue other"
		case cycle(id, deps) != nil:
			d.Refuse = "depends_on cycle: " + strings.Join(cycle(id, deps), " → ")
		default:
			for _, dep := range e.DependsOn() {
				state, known := where[dep]
				if !known && !in.Claimed[dep] {
					d.Refuse = fmt.Sprintf("depends_on %s: no task of the pool has that id (not in %s/, %s/, %s/ or %s/)", dep, Preparing, Pending, Done, Failed)
					break
				}
				if d.Waits != "" {
					continue
				}
				switch {
				case state == Done && in.Unmerged != nil && in.Unmerged(dep) != "":
					d.Waits = fmt.Sprintf("depends_on %s (%s)", dep, in.Unmerged(dep))
				case state == Failed:
					d.Waits = fmt.Sprintf("depends_on %s (failed)", dep)
				case state != Done:
					d.Waits = "depends_on " + dep
				}
			}
			if d.Refuse != "" {
				d.Waits = ""
				break
			}
			if d.Waits != "" {
				break
			}
			if free <= 0 {
				d.Waits = "queue full"
				break
			}
			free--
			plan.Next = append(plan.Next, e)
		}
		plan.Pending = append(plan.Pending, d)
	}
	return plan
}

// cycle returns the depends_on cycle through id among the pending tasks
// (deps: id → its depends_on), as "id → … → id", or nil.
func cycle(id string, deps map[string][]string) []string {
	var path []string
	seen := map[string]bool{}
	var walk func(n string) bool
	walk = func(n string) bool {
		path = append(path, n)
		for _, d := range deps[n] {
			if d == id {
				path = append(path, d)
				return true
			}
			if _, pending := deps[d]; pending && !seen[d] {
				seen[d] = true
				if walk(d) {
					return true
				}
			}
		}
		path = path[:len(path)-1]
		return false
	}
	if walk(id) {
		return path
	}
	return nil
}
