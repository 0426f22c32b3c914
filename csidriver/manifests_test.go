package csidriver

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"

	"github.com/realm-dev/realm/policy"
)

// decodeManifests decodes every document of deploy/kubernetes/*.yaml
// strictly with the Kubernetes API types: an unknown (misspelt) or
// duplicate field, or a kind the API does not have, fails.
func decodeManifests(t *testing.T) []runtime.Object {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, appsv1.AddToScheme, rbacv1.AddToScheme, storagev1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	dec := json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme, scheme, json.SerializerOptions{Yaml: true, Strict: true})
	files, err := filepath.Glob("../deploy/kubernetes/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in deploy/kubernetes (%v)", err)
	}
	var objs []runtime.Object
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range bytes.Split(data, []byte("\n---\n")) {
			if len(bytes.TrimSpace(doc)) == 0 {
				continue
			}
			obj, _, err := dec.Decode(doc, nil, nil)
			if err != nil {
				t.Errorf("%s, document %d: %v", filepath.Base(f), i+1, err)
				continue
			}
			objs = append(objs, obj)
		}
	}
	return objs
}

// TestManifests decodes the manifests strictly and checks that they name
// this driver and give it parameters it accepts: a StorageClass's named
// policy is in the plugin's policy ConfigMap, and its policies parse.
func TestManifests(t *testing.T) {
	kinds := map[string]int{}
	objs := decodeManifests(t)
	policies := map[string]string{} // the plugin's policy dir: NAME.yaml → content
	for _, obj := range objs {
		if cm, ok := obj.(*corev1.ConfigMap); ok && cm.Name == "realm-csi-policies" {
			for file, data := range cm.Data {
				if _, err := policy.Parse(file, []byte(data)); err != nil {
					t.Errorf("ConfigMap %s: %v", cm.Name, err)
				}
				policies[file] = data
			}
		}
	}
	for _, obj := range objs {
		kinds[reflect.TypeOf(obj).Elem().Name()]++
		switch o := obj.(type) {
		case *storagev1.CSIDriver:
			if o.Name != DriverName {
				t.Errorf("CSIDriver %s, want %s", o.Name, DriverName)
			}
		case *storagev1.StorageClass:
			if o.Provisioner != DriverName {
				t.Errorf("StorageClass %s: provisioner %s, want %s", o.Name, o.Provisioner, DriverName)
			}
			p, err := parseParams(o.Parameters)
			if err != nil {
				t.Errorf("StorageClass %s: %v", o.Name, err)
			}
			if _, ok := policies[p.policyName+".yaml"]; p.policyName != "" && !ok {
				t.Errorf("StorageClass %s names policy %q, which the realm-csi-policies ConfigMap does not hold", o.Name, p.policyName)
			}
		case *corev1.Pod:
			for _, v := range o.Spec.Volumes {
				if v.CSI != nil {
					if _, err := parseParams(v.CSI.VolumeAttributes); err != nil {
						t.Errorf("pod %s, volume %s: %v", o.Name, v.Name, err)
					}
				}
			}
		}
	}
	for _, k := range []string{"ConfigMap", "CSIDriver", "StorageClass", "DaemonSet", "Deployment", "ClusterRole", "ClusterRoleBinding", "ServiceAccount", "Pod", "PersistentVolumeClaim"} {
		if kinds[k] == 0 {
			t.Errorf("no %s among the manifests (%v)", k, kinds)
		}
	}
}
