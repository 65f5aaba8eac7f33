package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// testRepo is a git repository on disk with a default branch "main" (train.py says "main") and
// a branch "feature" one commit further (train.py says "feature", plus examples/mnist.py).
type testRepo struct {
	dir          string
	main, branch plumbing.Hash
}

func newTestRepo(t *testing.T) testRepo {
	t.Helper()
	dir := t.TempDir()
	repo, err := git.PlainInitWithOptions(dir, &git.PlainInitOptions{
		InitOptions: git.InitOptions{DefaultBranch: plumbing.NewBranchReferenceName("main")},
	})
	if err != nil {
		t.Fatal(err)
	}
	wt, err := repo.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	commit := func(files map[string]string, msg string) plumbing.Hash {
		for name, content := range files {
			path := filepath.Join(dir, name)
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := wt.Add(name); err != nil {
				t.Fatal(err)
			}
		}
		h, err := wt.Commit(msg, &git.CommitOptions{Author: &object.Signature{Name: "t", Email: "t@example.com", When: time.Unix(1e9, 0)}})
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	r := testRepo{dir: dir}
	r.main = commit(map[string]string{"train.py": "main\n"}, "first")
	if err := wt.Checkout(&git.CheckoutOptions{Branch: plumbing.NewBranchReferenceName("feature"), Create: true}); err != nil {
		t.Fatal(err)
	}
	r.branch = commit(map[string]string{"train.py": "feature\n", "examples/mnist.py": "mnist\n"}, "second")
	if err := wt.Checkout(&git.CheckoutOptions{Branch: plumbing.NewBranchReferenceName("main")}); err != nil {
		t.Fatal(err)
	}
	return r
}

// url is the repository's file:// URL; go-git's file:// client serves it with Debian's
// git-upload-pack, as a git server would.
func (r testRepo) url() string { return "file://" + r.dir }

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestGitSyncClonesTheDefaultBranchAndANamedOne(t *testing.T) {
	repo := newTestRepo(t)
	tests := []struct {
		branch     string
		wantFile   string
		wantCommit plumbing.Hash
	}{
		{"", "main\n", repo.main},
		{"feature", "feature\n", repo.branch},
	}
	for _, tc := range tests {
		dest := t.TempDir()
		commit, err := syncRepo(context.Background(), gitSyncConfig{repo: repo.url(), branch: tc.branch, dest: dest, retry: time.Millisecond}, os.Stderr)
		if err != nil {
			t.Fatalf("branch %q: %v", tc.branch, err)
		}
		if commit != tc.wantCommit.String() {
			t.Errorf("branch %q: checked out %s, want %s", tc.branch, commit, tc.wantCommit)
		}
		if got := readFile(t, filepath.Join(dest, "train.py")); got != tc.wantFile {
			t.Errorf("branch %q: train.py = %q, want %q", tc.branch, got, tc.wantFile)
		}
	}
}

// A clone already in the emptyDir (the init container ran before in this pod) is kept, even
// when the branch moved since: every container of a pod sees one commit.
func TestGitSyncKeepsAnExistingClone(t *testing.T) {
	repo := newTestRepo(t)
	dest := t.TempDir()
	cfg := gitSyncConfig{repo: repo.url(), dest: dest, retry: time.Millisecond}
	first, err := syncRepo(context.Background(), cfg, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	cfg.branch = "feature"
	again, err := syncRepo(context.Background(), cfg, os.Stderr)
	if err != nil || again != first {
		t.Errorf("second sync = %s, %v; want the first clone %s kept", again, err, first)
	}
}

// A missing branch or repository fails at once, with the reason in the termination message;
// it is not retried until the timeout.
func TestGitSyncFailsFastOnWhatCannotWork(t *testing.T) {
	repo := newTestRepo(t)
	termLog := filepath.Join(t.TempDir(), "termination-log")
	old := terminationLogPath
	terminationLogPath = termLog
	defer func() { terminationLogPath = old }()

	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"missing branch", []string{"--repo=" + repo.url(), "--branch=nope"}, "nope"},
		{"missing repository", []string{"--repo=file://" + filepath.Join(t.TempDir(), "none")}, "repository not found"},
	} {
		start := time.Now()
		code := gitSync(append(tc.args, "--dest="+t.TempDir(), "--timeout=30s"))
		if code != 1 {
			t.Errorf("%s: exit %d, want 1", tc.name, code)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("%s: took %s; a permanent failure must not be retried", tc.name, d)
		}
		if msg := readFile(t, termLog); !strings.Contains(msg, tc.want) {
			t.Errorf("%s: termination message %q does not say %q", tc.name, msg, tc.want)
		}
	}
}
