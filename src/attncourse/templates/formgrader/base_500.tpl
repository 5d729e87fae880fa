{%- extends 'course_base.tpl' -%}
{%- block title -%}
出错了
{%- endblock -%}
{%- block body -%}
<div class="panel-body">
formgrader 出错了。课程文件夹是否在 Jupyter 的根目录之下？详见 Jupyter 服务器的日志。
<span id="error-{{ error_code }}"></span>
</div>
{%- endblock -%}
