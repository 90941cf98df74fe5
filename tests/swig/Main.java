// The SWIG binding from Java (tools/test_swig.sh builds and runs it): compile
// a kernel, launch it on the CPU (and on CUDA device 0 when there is one),
// check the result; a compile error and a bad launch give Oxide's messages.
import oxide.swig.SWIGTYPE_p_ox_device_s;
import oxide.swig.SWIGTYPE_p_ox_kernel_s;
import oxide.swig.SWIGTYPE_p_ox_module_s;
import oxide.swig.SWIGTYPE_p_ox_tensor_s;
import oxide.swig.oxide;
import oxide.swig.oxideConstants;
import oxide.swig.oxs_args;

public class Main {
    static final String SAXPY =
        "#[kernel]\n"
        + "fn saxpy(x: &[f32], y: &[f32], out: DisjointSlice<f32>, alpha: f32) {\n"
        + "    let i = thread::index_1d();\n"
        + "    if let Some(o) = out.get_mut(i) { *o = alpha * x[i] + y[i]; }\n"
        + "}\n";

    static int failures = 0;

    static void check(boolean ok, String what) {
        if (!ok) {
            failures++;
            System.err.println("FAILED: " + what + " (last error: " + oxide.ox_last_error() + ")");
        }
    }

    static void run(SWIGTYPE_p_ox_device_s dev) {
        int n = 1001;
        float[] x = new float[n], y = new float[n], out = new float[n];
        for (int i = 0; i < n; i++) { x[i] = i; y[i] = 1; }
        SWIGTYPE_p_ox_module_s m = oxide.oxs_compile(dev, SAXPY, "saxpy.oxk");
        check(m != null, "compile");
        SWIGTYPE_p_ox_kernel_s k = oxide.oxs_kernel(m, "saxpy");
        check(k != null && oxide.ox_kernel_num_params(k) == 4, "kernel");
        SWIGTYPE_p_ox_tensor_s tx = oxide.oxs_tensor_f32(dev, x, n);
        SWIGTYPE_p_ox_tensor_s ty = oxide.oxs_tensor_f32(dev, y, n);
        SWIGTYPE_p_ox_tensor_s to = oxide.oxs_tensor_f32(dev, out, n);
        oxs_args a = oxide.oxs_args_new();
        oxide.oxs_args_tensor(a, tx);
        oxide.oxs_args_tensor(a, ty);
        oxide.oxs_args_tensor(a, to);
        oxide.oxs_args_f32(a, 3.0f);
        check(oxide.oxs_launch(k, null, (n + 255) / 256, 256, a) == oxideConstants.OX_OK, "launch");
        check(oxide.oxs_read_f32(to, out, n) == oxideConstants.OX_OK, "read back");
        int bad = 0;
        for (int i = 0; i < n; i++) if (out[i] != 3.0f * i + 1) bad++;
        check(bad == 0, bad + " wrong elements");
        // a bad launch: an i32 scalar for the f32 parameter
        oxs_args b = oxide.oxs_args_new();
        oxide.oxs_args_tensor(b, tx);
        oxide.oxs_args_tensor(b, ty);
        oxide.oxs_args_tensor(b, to);
        oxide.oxs_args_i32(b, 3);
        check(oxide.oxs_launch(k, null, 4, 256, b) == oxideConstants.OX_ERR_INVALID_ARGUMENT
              && oxide.ox_last_error().contains("f32"), "a wrong scalar type is refused");
        oxide.oxs_args_free(a);
        oxide.oxs_args_free(b);
        oxide.ox_tensor_release(tx);
        oxide.ox_tensor_release(ty);
        oxide.ox_tensor_release(to);
        oxide.ox_module_destroy(m);
        System.out.println("swig java on " + oxide.ox_device_name(dev) + ": "
                           + (bad == 0 ? "ok" : "WRONG"));
    }

    public static void main(String[] args) {
        System.loadLibrary("oxide_java");
        check(oxide.ox_abi_version() == oxideConstants.OX_ABI_VERSION, "ABI version");
        run(oxide.oxs_device(oxideConstants.OX_DEVICE_CPU, 0));
        if (args.length > 0 && args[0].equals("cuda"))
            run(oxide.oxs_device(oxideConstants.OX_DEVICE_CUDA, 0));
        SWIGTYPE_p_ox_device_s cpu = oxide.oxs_device(oxideConstants.OX_DEVICE_CPU, 0);
        check(oxide.oxs_compile(cpu, "#[kernel]\nfn k(x: DisjointSlice<f32>) { oops }\n", "bad.oxk") == null
              && oxide.ox_last_error().contains("bad.oxk:2:"), "a compile error names file:line");
        if (failures > 0) System.exit(1);
        System.out.println("swig java: PASSED");
    }
}
