package v1alpha1

import (
	"net/url"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// What a repository URL of appCodesToSync may be, beyond its form (the CRD's rules): its
// transport must protect the code, and it must carry no credential. The admission webhook
// refuses such an entry, and the engine refuses to run one (InvalidSpec, nothing created), for a
// job admitted without the webhook.
//
//   - http:// and git:// neither encrypt the code nor authenticate the server: anyone on the
//     path between a pod and the server can change what the job runs. They are accepted only
//     with allowInsecureTransport.
//   - Any user information in an http(s) URL (a token written as the user, or user:password),
//     and a password in any URL, is refused: the URL is in the pod's spec and in messages, for
//     everyone who may read pods. An ssh:// URL's user (git@) names the account, not a secret.

// AppCodeURLErrors checks the URL of every entry of appCodesToSync, at path p.
func AppCodeURLErrors(p *field.Path, codes []AppCode) field.ErrorList {
	var errs field.ErrorList
	for i := range codes {
		c, cp := &codes[i], p.Index(i).Child("gitRepo")
		scheme, rest, found := strings.Cut(c.GitRepo, "://")
		if !found {
			continue // the scp form user@host:path is SSH
		}
		switch strings.ToLower(scheme) {
		case "http", "git":
			if !c.AllowInsecureTransport {
				errs = append(errs, field.Invalid(cp, RedactGitURL(c.GitRepo), scheme+"://"+
					" neither encrypts the code nor authenticates the server, so anyone between the pods and the server can change what the job runs: "+
					"use https:// or ssh://, or set allowInsecureTransport: true"))
			}
		}
		authority, _, _ := strings.Cut(rest, "/")
		user, _, hasUser := strings.Cut(authority, "@")
		if !hasUser {
			continue
		}
		switch s := strings.ToLower(scheme); {
		case strings.Contains(user, ":"), s == "http", s == "https":
			errs = append(errs, field.Invalid(cp, RedactGitURL(c.GitRepo),
				"must not carry a user, token or password: the URL is visible in the pod's spec and logs; use an ssh:// URL with gitSecretName"))
		}
	}
	return errs
}

// RedactGitURL is a repository URL fit for messages: without its user information, query and
// fragment, where a token could hide. The scp form user@host:path is left as it is (its user is
// an account name).
func RedactGitURL(repo string) string {
	if !strings.Contains(repo, "://") {
		return repo
	}
	u, err := url.Parse(repo)
	if err != nil {
		return "<a URL that does not parse>"
	}
	if u.User != nil {
		if _, hasPassword := u.User.Password(); hasPassword || u.Scheme == "http" || u.Scheme == "https" {
			u.User = url.User("redacted")
		}
	}
	if u.RawQuery != "" {
		u.RawQuery = "redacted"
	}
	u.Fragment = ""
	return u.String()
}
