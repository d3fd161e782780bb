// Command kueue-names-oracle prints what Kueue v0.19.2 itself computes for the fixtures of
// tests/test_queues_quota.py: workload names (jobframework), a pod group role hash (pkg/util/pod) and the
// untolerated-taint wording. Run: cd hack/kueue-names-oracle && go run .

package main

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/kueue/pkg/controller/jobframework"
	utilpod "sigs.k8s.io/kueue/pkg/util/pod"
)

func main() {
	job := schema.GroupVersionKind{Group: "batch", Version: "v1", Kind: "Job"}
	pod := schema.GroupVersionKind{Group: "", Version: "v1", Kind: "Pod"}
	fmt.Println(jobframework.GetWorkloadNameForOwnerWithGVK("sample-job", types.UID("3f0b4a6e-1111-4222-8333-944455556666"), job))
	fmt.Println(jobframework.GetWorkloadNameForOwnerWithGVK("trainer", types.UID(""), pod))
	prio := int32(0)
	spec := corev1.PodSpec{
		Containers: []corev1.Container{{
			Name: "c", Image: "x",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				"cpu": resource.MustParse("1"), "memory": resource.MustParse("200Mi"), "nvidia.com/gpu": resource.MustParse("2")},
				Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("2")}},
			Ports: []corev1.ContainerPort{{ContainerPort: 8080, Protocol: "TCP"}},
		}},
		NodeSelector: map[string]string{"pool": "a100"},
		Tolerations:  []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: "Exists", Effect: "NoSchedule"}},
		Priority:     &prio,
	}
	h, _ := utilpod.GenerateRoleHash(&spec)
	fmt.Println(h)
	spec2 := corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x",
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{"cpu": resource.MustParse("500m")}}}}, Priority: &prio}
	h2, _ := utilpod.GenerateRoleHash(&spec2)
	fmt.Println(h2)
	t := corev1.Taint{Key: "nvidia.com/gpu", Value: "present", Effect: "NoSchedule"}
	fmt.Printf("untolerated taint %s in flavor %s\n", t, "gpu")
}
