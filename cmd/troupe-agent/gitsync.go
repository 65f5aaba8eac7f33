package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
	"github.com/troupe-dev/troupe/pkg/engine"
)

type gitSyncConfig struct {
	repo    string
	branch  string
	dest    string
	sshDir  string
	timeout time.Duration
	retry   time.Duration
	termLog string
}

// gitSync is the git init container of a job's pods (appCodesToSync): it clones one branch of
// a repository, shallow, into the pod's emptyDir with go-git, over any transport go-git speaks
// (https, ssh with the Secret's deploy key, git, file). Transient failures are retried until
// the timeout; a repository, branch or key that cannot work fails at once. Exit 0 on success,
// 1 with the reason in the termination message otherwise.
func gitSync(args []string) int {
	cfg := gitSyncConfig{}
	fs := flag.NewFlagSet("git-sync", flag.ContinueOnError)
	fs.StringVar(&cfg.repo, "repo", "", "URL of the repository (https://, ssh://, git://, file:// or user@host:path).")
	fs.StringVar(&cfg.branch, "branch", "", "Branch to check out; empty takes the repository's default branch.")
	fs.StringVar(&cfg.dest, "dest", engine.GitSyncDest, "Directory to clone into (the pod's emptyDir).")
	fs.StringVar(&cfg.sshDir, "ssh-dir", "", "Directory holding the SSH private key (file \"ssh\") and optionally \"known_hosts\".")
	fs.DurationVar(&cfg.timeout, "timeout", 5*time.Minute, "How long transient failures are retried.")
	fs.DurationVar(&cfg.retry, "retry-interval", 2*time.Second, "First pause between two attempts; it doubles up to 30s.")
	fs.StringVar(&cfg.termLog, "termination-log", terminationLogPath, "File the reason of a failure is written to, for the pod's status.")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if cfg.repo == "" {
		fmt.Fprintln(os.Stderr, "troupe-agent git-sync: --repo is required")
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.timeout)
	defer cancel()
	commit, err := syncRepo(ctx, cfg, os.Stderr)
	if err != nil {
		msg := cfg.redact(fmt.Sprintf("git-sync %s: %v", cfg.repo, err))
		fmt.Fprintln(os.Stderr, "troupe-agent", msg)
		_ = os.WriteFile(cfg.termLog, []byte(msg), 0o644)
		return 1
	}
	fmt.Fprintf(os.Stderr, "troupe-agent git-sync: %s at %s in %s\n", troupev1.RedactGitURL(cfg.repo), commit, cfg.dest)
	return 0
}

// redact replaces the repository's URL in msg by its redacted form: messages reach the pod's
// logs and status, and the URL's user information or query could be a credential.
func (c gitSyncConfig) redact(msg string) string {
	return strings.ReplaceAll(msg, c.repo, troupev1.RedactGitURL(c.repo))
}

// syncRepo clones the repository into cfg.dest and returns the commit checked out. A
// repository already there (the pod's init containers ran before, and the emptyDir outlived
// them) is kept as it is, so every container of the pod keeps seeing the same commit.
func syncRepo(ctx context.Context, cfg gitSyncConfig, log io.Writer) (string, error) {
	if repo, err := git.PlainOpen(cfg.dest); err == nil {
		if head, err := repo.Head(); err == nil {
			_, _ = fmt.Fprintf(log, "troupe-agent git-sync: %s already holds a clone; keeping it\n", cfg.dest)
			return head.Hash().String(), nil
		}
	}
	opts := &git.CloneOptions{URL: cfg.repo, Depth: 1, SingleBranch: true, Tags: git.NoTags}
	if cfg.branch != "" {
		opts.ReferenceName = plumbing.NewBranchReferenceName(cfg.branch)
	}
	if cfg.sshDir != "" {
		auth, err := sshAuth(cfg.repo, cfg.sshDir, log)
		if err != nil {
			return "", err
		}
		opts.Auth = auth
	}
	pause := cfg.retry
	for {
		if err := clearDir(cfg.dest); err != nil {
			return "", err
		}
		repo, err := git.PlainCloneContext(ctx, cfg.dest, false, opts)
		if err == nil {
			head, err := repo.Head()
			if err != nil {
				return "", fmt.Errorf("read HEAD of the clone: %w", err)
			}
			return head.Hash().String(), nil
		}
		if permanent(err) {
			return "", err
		}
		_, _ = fmt.Fprintf(log, "troupe-agent git-sync: %s; retrying in %s\n", cfg.redact(err.Error()), pause)
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("gave up: %w", err)
		case <-time.After(pause):
		}
		pause = min(2*pause, 30*time.Second)
	}
}

// permanent tells errors that another attempt cannot fix: no such repository or branch, a key
// the server refuses, or a server whose host key known_hosts does not list.
func permanent(err error) bool {
	var noRef git.NoMatchingRefSpecError
	var hostKey *knownhosts.KeyError
	return errors.As(err, &hostKey) ||
		errors.Is(err, transport.ErrRepositoryNotFound) ||
		errors.Is(err, transport.ErrAuthenticationRequired) ||
		errors.Is(err, transport.ErrAuthorizationFailed) ||
		errors.Is(err, transport.ErrInvalidAuthMethod) ||
		errors.Is(err, transport.ErrEmptyRemoteRepository) ||
		errors.Is(err, plumbing.ErrReferenceNotFound) ||
		errors.As(err, &noRef)
}

// sshAuth is public-key authentication with the Secret's key "ssh", as the URL's user (git when
// it names none). The server's host key is checked against the Secret's "known_hosts" when it
// has one; without it any host key is accepted, as kube-openmpi's Secrets hold only the key.
func sshAuth(repo, dir string, log io.Writer) (*gitssh.PublicKeys, error) {
	ep, err := transport.NewEndpoint(repo)
	if err != nil {
		return nil, fmt.Errorf("parse repository URL: %w", err)
	}
	user := ep.User
	if user == "" {
		user = "git"
	}
	key, err := os.ReadFile(filepath.Join(dir, troupev1.GitSecretSSHKey))
	if err != nil {
		return nil, fmt.Errorf("read the SSH key: %w", err)
	}
	auth, err := gitssh.NewPublicKeys(user, key, "")
	if err != nil {
		return nil, fmt.Errorf("the Secret's key %q is not a usable private key (unencrypted OpenSSH or PEM): %w", troupev1.GitSecretSSHKey, err)
	}
	knownHosts := filepath.Join(dir, troupev1.GitSecretKnownHosts)
	if _, err := os.Stat(knownHosts); err == nil {
		cb, err := gitssh.NewKnownHostsCallback(knownHosts)
		if err != nil {
			return nil, fmt.Errorf("read known_hosts: %w", err)
		}
		auth.HostKeyCallback = cb
	} else {
		_, _ = fmt.Fprintf(log, "troupe-agent git-sync: the Secret has no %q: accepting the server's host key unchecked\n", troupev1.GitSecretKnownHosts)
		auth.HostKeyCallback = ssh.InsecureIgnoreHostKey() // documented: no known_hosts given
	}
	return auth, nil
}

// clearDir empties dir (the emptyDir's mount point, which itself cannot be removed), so a clone
// interrupted half-way is retried from scratch.
func clearDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return os.MkdirAll(dir, 0o755)
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}
