{%- extends 'course_base.tpl' -%}
{%- block title -%}
没有权限
{%- endblock -%}
{%- block body -%}
<div class="panel-body">
你没有打开 formgrader 的权限。
<span id="error-{{ error_code }}"></span>
</div>
{%- endblock -%}
