package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueuev1 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	troupev1 "github.com/troupe-dev/troupe/apis/troupe/v1alpha1"
)

// The levels of the test's Kueue Topology, as node labels (the manifests of testdata/tas name
// them).
const (
	blockLabel = "troupe.dev/e2e-block"
	rackLabel  = "troupe.dev/e2e-rack"
)

// TestKueueTopologyAwarePlacement runs troupe jobs through Kueue's topology-aware scheduling
// (TAS) on a pool of the test's own: 2 blocks x 2 racks x 4 hosts of 5 CPUs (a rack holds 20
// pods of 1 CPU), a Topology block/rack/hostname, a TAS ResourceFlavor and a queue of it. Jobs
// are written as users write them (testdata/tas, kubectl apply) and ask for a level with
// Kueue's podset annotations on their templates:
//   - an MPIJob of 1 launcher + 15 workers and a PyTorchJob of 1 master + 15 workers, each pod
//     set requiring a rack, run every pod in one rack;
//   - an MPIJob of 24 workers preferring a block runs on the fewest racks it fits (2), in one
//     block;
//   - the hostfile (MPI) and RANK (torch) follow the placement: each rack's and each host's pods
//     hold consecutive ranks.
func TestKueueTopologyAwarePlacement(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	pool := "tas-" + ns
	nodes := tasPool(t, pool)
	kc := kueueClient(t)
	tasQueue(t, kc, ns, pool)

	t.Run("MPIJob 1+15 requiring a rack", func(t *testing.T) {
		apply(t, ns, "mpijob-rack.yaml")
		job := &troupev1.MPIJob{ObjectMeta: metav1.ObjectMeta{Name: "rack", Namespace: ns}}
		pods := boundJobPods(t, job, 16)
		racks := domainsOf(pods, nodes, rackLabel)
		t.Logf("rack: %d pods on racks %v", len(pods), racks)
		if len(racks) != 1 {
			t.Errorf("the job's 16 pods are on racks %v, want one rack", racks)
		}
		order := hostfileOrder(t, ns, "rack", nodes)
		expectGrouped(t, "hostfile order of rack's workers", order)
		kubectlDeleteJob(t, job, "mpijob")
	})

	t.Run("PyTorchJob 1+15 requiring a rack", func(t *testing.T) {
		apply(t, ns, "pytorchjob-rack.yaml")
		job := &troupev1.PyTorchJob{ObjectMeta: metav1.ObjectMeta{Name: "torch-rack", Namespace: ns}}
		pods := boundJobPods(t, job, 16)
		racks := domainsOf(pods, nodes, rackLabel)
		t.Logf("torch-rack: %d pods on racks %v", len(pods), racks)
		if len(racks) != 1 {
			t.Errorf("the job's 16 pods are on racks %v, want one rack", racks)
		}
		expectGrouped(t, "RANK order of torch-rack's pods", rankOrder(t, pods, nodes))
		kubectlDeleteJob(t, job, "pytorchjob")
	})

	t.Run("MPIJob of 24 preferring a block", func(t *testing.T) {
		apply(t, ns, "mpijob-block.yaml")
		job := &troupev1.MPIJob{ObjectMeta: metav1.ObjectMeta{Name: "block", Namespace: ns}}
		pods := boundJobPods(t, job, 25)
		var workers []corev1.Pod
		for _, p := range pods {
			if p.Labels[troupev1.LabelRole] == "worker" {
				workers = append(workers, p)
			} else {
				// Generated from the workers' template, it is placed by TAS as a pod set of
				// its own: Kueue's ungater gave it its host.
				t.Logf("block: launcher %s on %s (nodeSelector %v)", p.Name, p.Spec.NodeName, p.Spec.NodeSelector)
				if p.Spec.NodeSelector[corev1.LabelHostname] != p.Spec.NodeName {
					t.Errorf("launcher %s on %s with nodeSelector %v: want the host Kueue's TAS gave it", p.Name, p.Spec.NodeName, p.Spec.NodeSelector)
				}
			}
		}
		racks, blocks := domainsOf(workers, nodes, rackLabel), domainsOf(workers, nodes, blockLabel)
		t.Logf("block: %d workers on racks %v of blocks %v", len(workers), racks, blocks)
		if len(racks) != 2 || len(blocks) != 1 {
			t.Errorf("24 workers on racks %v of blocks %v, want 2 racks (20 pods a rack) of one block", racks, blocks)
		}
		expectGrouped(t, "hostfile order of block's workers", hostfileOrder(t, ns, "block", nodes))
		kubectlDeleteJob(t, job, "mpijob")
	})
}

// place is where a pod runs: its node's block, rack and host.
type place struct{ block, rack, host string }

// tasPool creates the test's 16 simulated nodes, 2 blocks x 2 racks x 4 hosts of 5 CPUs, with
// the block, rack and hostname labels of the Topology, labelled and tainted as the test's pool
// (only its pods go there); deleted at the end. It returns each node's place.
func tasPool(t *testing.T, pool string) map[string]place {
	t.Helper()
	nodes := map[string]place{}
	five := resource.MustParse("5")
	for b := 1; b <= 2; b++ {
		for r := 1; r <= 2; r++ {
			for h := 1; h <= 4; h++ {
				p := place{block: fmt.Sprintf("b%d", b), rack: fmt.Sprintf("b%d-r%d", b, r)}
				p.host = fmt.Sprintf("%s-%s-h%d", pool, p.rack, h)
				nodes[p.host] = p
				node := &corev1.Node{
					ObjectMeta: metav1.ObjectMeta{
						Name:        p.host,
						Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
						Labels: map[string]string{"type": "kwok", gangPoolLabel: pool, blockLabel: p.block, rackLabel: p.rack,
							corev1.LabelHostname: p.host},
					},
					Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: gangPoolLabel, Value: pool, Effect: corev1.TaintEffectNoSchedule}}},
					Status: corev1.NodeStatus{
						Capacity:    corev1.ResourceList{corev1.ResourceCPU: five, corev1.ResourceMemory: resource.MustParse("32Gi"), corev1.ResourcePods: resource.MustParse("110")},
						Allocatable: corev1.ResourceList{corev1.ResourceCPU: five, corev1.ResourceMemory: resource.MustParse("32Gi"), corev1.ResourcePods: resource.MustParse("110")},
					},
				}
				if err := k8s.Create(context.Background(), node); err != nil {
					t.Fatalf("node %s: %v", node.Name, err)
				}
				t.Cleanup(func() { _ = k8s.Delete(context.Background(), node) })
			}
		}
	}
	eventually(t, "the 16 nodes Ready", func(ctx context.Context) (bool, error) {
		list := &corev1.NodeList{}
		if err := k8s.List(ctx, list, client.MatchingLabels{gangPoolLabel: pool}); err != nil {
			return false, err
		}
		ready := 0
		for _, n := range list.Items {
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue && n.Status.Allocatable.Cpu().Value() == 5 {
					ready++
				}
			}
		}
		return ready == len(nodes), nil
	})
	return nodes
}

// tasQueue makes the test's Topology (block, rack, hostname), a TAS ResourceFlavor of the
// pool's nodes with it, a ClusterQueue of the flavor for the namespace and the LocalQueue lq.
func tasQueue(t *testing.T, kc client.Client, ns, pool string) {
	t.Helper()
	topology := &kueuev1.Topology{
		ObjectMeta: metav1.ObjectMeta{Name: pool},
		Spec: kueuev1.TopologySpec{Levels: []kueuev1.TopologyLevel{
			{NodeLabel: blockLabel}, {NodeLabel: rackLabel}, {NodeLabel: corev1.LabelHostname},
		}},
	}
	flavor, cq, lq := poolQueue(ns, pool, "80", "512Gi")
	flavor.Spec.TopologyName = ptr.To(kueuev1.TopologyReference(pool))
	createQueueObjects(t, kc, topology, flavor, cq, lq)
	waitClusterQueueActive(t, kc, cq)
}

// apply creates a manifest of testdata/tas in ns with kubectl, as a user does.
func apply(t *testing.T, ns, manifest string) {
	t.Helper()
	if out, err := kubectl("apply", "-n", ns, "-f", filepath.Join("testdata", "tas", manifest)); err != nil {
		t.Fatalf("kubectl apply %s: %v\n%s", manifest, err, out)
	}
}

// boundJobPods waits until the job has n live pods, all bound to a node, and returns them.
func boundJobPods(t *testing.T, job queuedJob, n int) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	eventually(t, fmt.Sprintf("%s: %d pods bound", job.GetName(), n), func(ctx context.Context) (bool, error) {
		var err error
		if pods, err = queuedJobPods(ctx, job); err != nil {
			return false, err
		}
		bound := 0
		for _, p := range pods {
			if p.Spec.NodeName != "" {
				bound++
			}
		}
		return bound == n && len(pods) == n, nil
	})
	return pods
}

// domainsOf lists the distinct values of level (block or rack label) of the pods' nodes.
func domainsOf(pods []corev1.Pod, nodes map[string]place, level string) []string {
	var out []string
	for _, p := range pods {
		d := nodes[p.Spec.NodeName].rack
		if level == blockLabel {
			d = nodes[p.Spec.NodeName].block
		}
		if !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	sort.Strings(out)
	return out
}

// hostfileOrder is where the hosts of the MPIJob's hostfile run, in the hostfile's (rank)
// order, read with kubectl as a user would.
func hostfileOrder(t *testing.T, ns, job string, nodes map[string]place) []place {
	t.Helper()
	out, err := kubectl("get", "configmap", "-n", ns, job+"-mpi", "-o", "jsonpath={.data.hostfile}")
	if err != nil {
		t.Fatalf("the hostfile of %s: %v\n%s", job, err, out)
	}
	var order []place
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		pod := strings.SplitN(strings.Fields(line)[0], ".", 2)[0]
		p := &corev1.Pod{}
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: pod}, p); err != nil {
			t.Fatalf("pod %s of hostfile line %q: %v", pod, line, err)
		}
		order = append(order, nodes[p.Spec.NodeName])
	}
	return order
}

// rankOrder is where the torch job's pods run, in the order of their RANK.
func rankOrder(t *testing.T, pods []corev1.Pod, nodes map[string]place) []place {
	t.Helper()
	order := make([]place, len(pods))
	for _, p := range pods {
		rank := -1
		for _, c := range p.Spec.Containers {
			for _, e := range c.Env {
				if c.Name == troupev1.PyTorchMainContainer && e.Name == "RANK" {
					rank, _ = strconv.Atoi(e.Value)
				}
			}
		}
		if rank < 0 || rank >= len(pods) || order[rank] != (place{}) {
			t.Fatalf("pod %s has RANK %d: want a distinct rank below %d", p.Name, rank, len(pods))
		}
		order[rank] = nodes[p.Spec.NodeName]
	}
	return order
}

// expectGrouped: in rank order, each rack's and each host's pods come one after another (a
// rack or host seen once is never seen again after another).
func expectGrouped(t *testing.T, what string, order []place) {
	t.Helper()
	var racks, hosts []string
	for _, p := range order {
		if len(racks) == 0 || racks[len(racks)-1] != p.rack {
			racks = append(racks, p.rack)
		}
		if len(hosts) == 0 || hosts[len(hosts)-1] != p.host {
			hosts = append(hosts, p.host)
		}
	}
	t.Logf("%s: racks %v; hosts in turn %d", what, runs(order), len(hosts))
	if !distinct(racks) || !distinct(hosts) {
		t.Errorf("%s is not grouped by rack and host: %v", what, runs(order))
	}
}

func distinct(s []string) bool {
	seen := map[string]bool{}
	for _, v := range s {
		if seen[v] {
			return false
		}
		seen[v] = true
	}
	return true
}

// runs writes the order as runs of hosts: "b1-r1-h2 x5, b1-r1-h3 x5, ...".
func runs(order []place) string {
	var parts []string
	for i := 0; i < len(order); {
		j := i
		for j < len(order) && order[j] == order[i] {
			j++
		}
		parts = append(parts, fmt.Sprintf("%s/h%s x%d", order[i].rack, strings.TrimPrefix(order[i].host[strings.LastIndex(order[i].host, "-h"):], "-h"), j-i))
		i = j
	}
	return strings.Join(parts, ", ")
}

// kubectlDeleteJob deletes the job with kubectl and waits until its pods are gone, so that the next
// job finds the pool empty.
func kubectlDeleteJob(t *testing.T, job queuedJob, resource string) {
	t.Helper()
	if out, err := kubectl("delete", "-n", job.GetNamespace(), resource, job.GetName(), "--wait"); err != nil {
		t.Fatalf("kubectl delete %s: %v\n%s", job.GetName(), err, out)
	}
	eventually(t, job.GetName()+"'s pods gone", func(ctx context.Context) (bool, error) {
		pods := &corev1.PodList{}
		nameLabel := strings.ToLower(jobKind(job)) + ".troupe.dev/name"
		err := k8s.List(ctx, pods, client.InNamespace(job.GetNamespace()), client.MatchingLabels{nameLabel: job.GetName()})
		return err == nil && len(pods.Items) == 0, err
	})
}
