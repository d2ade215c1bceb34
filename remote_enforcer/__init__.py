"""The provider-side operator: ShadowPods become pods that stay alive."""
