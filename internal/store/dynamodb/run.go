package dynamodb

import (
	"context"

	"github.com/stratusflow/stratus"
)

func runKey(id string) item { return key(pkRun+id, skRun) }

// CreateRun inserts r; ECONFLICT if a run with r.ID exists.
func (s *Store) CreateRun(ctx context.Context, r stratus.Run) error {
	it := runKey(r.ID).setAll(map[string]av{
		attrRecord: str("run"), attrWID: str(newWID()),
		"id": str(r.ID), "task_id": text(r.TaskID), "task_title": text(r.TaskTitle), "flow": text(r.Flow),
		"status": text(r.Status), "work_dir": text(r.WorkDir), "task_path": text(r.TaskPath), "execution": text(r.Execution),
		"owner": text(r.Owner), "resumes": num(int64(r.Resumes)),
		"created_at": millis(r.CreatedAt), "ended_at": millis(r.EndedAt),
	})
	exists, err := s.create(ctx, it)
	if err != nil {
		return wrap("create run "+quote(r.ID), err)
	} else if exists {
		return stratus.Errorf(stratus.ECONFLICT, "run %q already exists (DynamoDB ConditionalCheckFailedException)", r.ID)
	}
	return nil
}

// GetRun returns the run with id; ENOTFOUND if there is none.
func (s *Store) GetRun(ctx context.Context, id string) (stratus.Run, error) {
	it, err := s.get(ctx, runKey(id))
	if err != nil {
		return stratus.Run{}, wrap("get run "+quote(id), err)
	} else if it == nil {
		return stratus.Run{}, stratus.Errorf(stratus.ENOTFOUND, "run %q not found", id)
	}
	return stratus.Run{
		ID: it.str("id"), TaskID: it.str("task_id"), TaskTitle: it.str("task_title"), Flow: it.str("flow"),
		Status: it.str("status"), WorkDir: it.str("work_dir"), TaskPath: it.str("task_path"), Execution: it.str("execution"),
		Owner: it.str("owner"), Resumes: int(it.int("resumes")),
		CreatedAt: it.time("created_at"), EndedAt: it.time("ended_at"),
	}, nil
}

// UpdateRun replaces Status, Execution, Owner, Resumes and EndedAt of run
// r.ID; ENOTFOUND if there is no such run.
func (s *Store) UpdateRun(ctx context.Context, r stratus.Run) error {
	missing, err := s.apply(ctx, update{runKey(r.ID), map[string]av{
		"status": text(r.Status), "execution": text(r.Execution), "owner": text(r.Owner), "resumes": num(int64(r.Resumes)),
		"ended_at": millis(r.EndedAt),
	}})
	if err != nil {
		return wrap("update run "+quote(r.ID), err)
	} else if missing {
		return stratus.Errorf(stratus.ENOTFOUND, "run %q not found (DynamoDB ConditionalCheckFailedException)", r.ID)
	}
	return nil
}
