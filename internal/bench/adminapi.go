package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/vigil-db/vigil/internal/admin"
)

// adminAPI is the few calls of Vigil's admin API the bench makes.
type adminAPI struct {
	addr, token string
}

func (a adminAPI) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(data)
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, "http://"+a.addr+path, rd)
	if err != nil {
		return err
	}
	if a.token != "" {
		req.Header.Set("Authorization", "Bearer "+a.token)
	}
	req.Header.Set("Content-Type", "application/json") // the admin API refuses state changes without it
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		var op admin.OpResult
		if json.Unmarshal(data, &op) == nil && op.Message != "" {
			return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, op.Message)
		}
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(data))
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

func (a adminAPI) servers(ctx context.Context) ([]admin.ServerView, error) {
	var list []admin.ServerView
	err := a.do(ctx, http.MethodGet, "/api/v1/servers", nil, &list)
	return list, err
}

// writer is the server Vigil routes writes to now.
func (a adminAPI) writer(ctx context.Context) (string, error) {
	list, err := a.servers(ctx)
	if err != nil {
		return "", err
	}
	for _, s := range list {
		if s.Writer && s.Writable && s.State == "ONLINE" {
			return s.Name, nil
		}
	}
	return "", errors.New("no routed writer")
}

// waitNewWriter waits until a writer other than old is routed.
func (a adminAPI) waitNewWriter(ctx context.Context, old string, timeout time.Duration) (string, error) {
	var nw string
	err := waitFor(ctx, timeout, "a new writer", func() error {
		w, err := a.writer(ctx)
		if err != nil {
			return err
		}
		if w == old {
			return fmt.Errorf("the writer is still %s", old)
		}
		nw = w
		return nil
	})
	return nw, err
}

func (a adminAPI) post(ctx context.Context, path string, body any) error {
	var op admin.OpResult
	if err := a.do(ctx, http.MethodPost, path, body, &op); err != nil {
		return err
	}
	if !op.OK {
		return fmt.Errorf("POST %s: %s", path, op.Message)
	}
	return nil
}

func (a adminAPI) switchover(ctx context.Context) (admin.OpResult, error) {
	var op admin.OpResult
	if err := a.do(ctx, http.MethodPost, "/api/v1/switchover", admin.OpRequest{}, &op); err != nil {
		return op, err
	}
	if !op.OK {
		return op, fmt.Errorf("switchover: %s", op.Message)
	}
	return op, nil
}

// poolOpen is the server connections Vigil's pools hold, over all
// servers.
func (a adminAPI) poolOpen(ctx context.Context) (int, error) {
	list, err := a.servers(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, s := range list {
		n += s.Pool.Open
	}
	return n, nil
}
